"""A tool's arguments explained when a client gets them wrong: each parameter's accepted names
and description (``_params_of``), and one sentence naming the parameter and the fix
(``explain_invalid``, ``explain_unknown``), never a pydantic dump (ADR 0015)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import AliasChoices, BaseModel, ValidationError
from pydantic.fields import FieldInfo


def _sentence(text: str) -> str:
    """One line that ends with a full stop."""
    text = " ".join(text.split()).rstrip()
    return text if text.endswith((".", "?", "!")) else text + "."


class _Param(BaseModel):
    name: str
    names: tuple[str, ...]  # every accepted argument name, the snake_case one first
    description: str = ""
    required: bool = False
    optional: bool = False  # None is accepted


def _params_of(fn: Callable[..., Any]) -> dict[str, _Param]:
    """The parameters of a tool function, from its annotations (names, aliases, descriptions)."""
    hints = get_type_hints(fn, include_extras=True)
    out: dict[str, _Param] = {}
    for name, param in inspect.signature(fn).parameters.items():
        hint = hints.get(name, Any)
        info = (
            next((m for m in get_args(hint)[1:] if isinstance(m, FieldInfo)), None)
            if (get_origin(hint) is Annotated)
            else None
        )
        names: tuple[str, ...] = (name,)
        if info is not None and isinstance(info.validation_alias, AliasChoices):
            names = tuple(str(c) for c in info.validation_alias.choices)
        base = get_args(hint)[0] if get_origin(hint) is Annotated else hint
        out[name] = _Param(
            name=name,
            names=names,
            description=(info.description or "") if info else "",
            required=param.default is inspect.Parameter.empty,
            optional=type(None) in get_args(base),
        )
    return out


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


_KIND_OF_VALUE = {
    "int": "a whole number such as 10",
    "bool": "true or false",
    "string": "text",
    "list": "a list",
    "dict": "an object",
    "model": "an object",
    "float": "a number",
}


def explain_invalid(tool: str, err: ValidationError, params: dict[str, _Param]) -> str:
    """One sentence for the client: what is wrong with which argument, and the fix. Names the
    argument and, for a value outside a fixed set, the value and the allowed ones (the caller's
    own input); never a pydantic dump or a link."""
    problems = err.errors(include_url=False)
    by_name = {n: p for p in params.values() for n in p.names}

    def where(loc: tuple[Any, ...]) -> tuple[str, _Param | None]:
        param = by_name.get(str(loc[0])) if loc else None
        path = param.name if param else (str(loc[0]) if loc else "the arguments")
        for part in loc[1:]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        return path, param

    first = problems[0]
    path, param = where(tuple(first["loc"]))
    kind, ctx = first["type"], first.get("ctx") or {}
    desc = param.description if param and len(first["loc"]) == 1 else ""
    if kind == "missing":
        text = f"{tool} needs {path}: call it again with {path} set" + (
            f" to {desc}" if desc else ""
        )
    elif kind in ("literal_error", "enum"):
        value = str(first.get("input"))[:40]
        leave = ", or leave it out" if param and param.optional else ""
        text = f"{path} {value!r} is not allowed: use one of {ctx.get('expected', 'the listed values')}{leave}"
    elif kind == "string_pattern_mismatch":
        text = f"{path} is not in the expected form" + (
            f": use {desc}" if desc else f" ({ctx.get('pattern')})"
        )
    elif kind in ("too_short", "string_too_short"):
        text = f"{path} must not be empty" + (f": set it to {desc}" if desc else "")
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next(iter(ctx.values()), "?")
        relation = {
            "greater_than_equal": "at least",
            "greater_than": "more than",
            "less_than_equal": "at most",
            "less_than": "less than",
        }[kind]
        text = f"{path} must be {relation} {bound}"
    else:
        wanted = next((v for k, v in _KIND_OF_VALUE.items() if kind.startswith(k)), None)
        if kind in ("model_type", "model_attributes_type", "dict_type") and path.startswith(
            "evidence"
        ):
            wanted = "an object with source_key and text"
        text = (
            f"{path} must be {wanted}"
            if wanted
            else f"{path} is not valid ({first['msg'][:1].lower() + first['msg'][1:]}); check "
            f"{tool}'s input schema"
        )
    others = sorted({where(tuple(p["loc"]))[0] for p in problems[1:]} - {path})
    if others:
        text += f" (also check {', '.join(others)})"
    return _sentence(text)


def explain_unknown(tool: str, key: str, params: dict[str, _Param]) -> str:
    known = [p.name for p in params.values()]
    guess = _camel_to_snake(key)
    hint = f"did you mean {guess}? " if guess in known and guess != key else ""
    return _sentence(
        f"{tool} has no parameter {key!r}: {hint}its parameters are {', '.join(known) or 'none'}"
    )
