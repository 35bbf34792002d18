"""Building pydantic model instances from values already known to be valid.

pydantic's validating constructor is the right default, but the framework builds a few models
(plain-text messages, above all) for every event with arguments that validation would pass through
unchanged. For those, setting the instance's four slots directly is about half the cost. This leans
on pydantic's instance layout (``__dict__`` plus three slots, the layout ``model_construct`` fills
in); if a pydantic release changes it, the builder falls back to validating.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["fast_builder"]

M = TypeVar("M", bound=BaseModel)

_LAYOUT = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def fast_builder(model: type[M]) -> Callable[[dict[str, Any], set[str]], M]:
    """A function ``(field values, fields set) -> instance`` for ``model``, which must have no
    extra fields, private attributes or post-init hook. The values must hold every field."""
    if (
        tuple(BaseModel.__slots__) != _LAYOUT
        or model.__private_attributes__
        or model.__pydantic_post_init__ is not None
        or model.model_config.get("extra") == "allow"
    ):
        return _validating(model)
    new = object.__new__
    set_dict = BaseModel.__dict__["__dict__"].__set__  # not object.__setattr__: no name lookup
    set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
    set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
    set_private = BaseModel.__dict__["__pydantic_private__"].__set__

    def build(values: dict[str, Any], fields_set: set[str]) -> M:
        instance = new(model)
        set_dict(instance, values)
        set_fields(instance, fields_set)
        set_extra(instance, None)
        set_private(instance, None)
        return instance

    return build


def _validating(model: type[M]) -> Callable[[dict[str, Any], set[str]], M]:
    def build(values: dict[str, Any], fields_set: set[str]) -> M:
        return model(**{name: values[name] for name in fields_set})

    return build
