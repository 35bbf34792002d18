"""The agents, alive now, that have named a resource (a ``ReActAgent``'s str model or tool).

A ``Runner`` given no resources refuses a tree with such an agent where it is made
(``adk.runner._named_without_resources``). The walk that finds one costs a few microseconds a
Runner; while this set is empty no agent of any tree can name one, so the Runner skips it (a
service that makes a Runner per request over ``ChatModel``s pays nothing for the check).

An agent adds itself when it comes to name one: made or set with a str model, given a str tool,
copied or unpickled from one that names one (``ReActAgent.__setstate__``). A subclass of
``ReActAgent`` that shadows ``model`` (a class attribute, a property of its own: set and read
without the recording setter) adds the class itself when it is made
(``ReActAgent.__init_subclass__``), so every Runner without resources looks while it exists. It
is not taken out when it no longer does (a model set back to a ``ChatModel``): the set may hold
more than the agents that name one now, which only costs the walk, never misses one. An agent
leaves it when it is collected, so it is no longer in any tree.
"""

from __future__ import annotations

from weakref import WeakSet

naming: WeakSet[object] = WeakSet()
