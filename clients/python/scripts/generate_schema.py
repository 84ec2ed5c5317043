"""Generates ``src/degrau_client/_schema.py`` from ``docs/openapi.json``: a
``TypedDict`` per object schema of ``components.schemas`` (the shapes the API
sends and takes), the error types of the envelope, and ``x-degrau-retry``, the
clients' one retry policy (the TypeScript client's ``src/retry-policy.ts`` is
generated from the same object).

Standard library only. ``tests/test_schema.py`` regenerates it and fails when the
file is not what this script makes of the current document, as the TypeScript
client's ``schema.ts`` is checked against ``openapi-typescript``.

    python clients/python/scripts/generate_schema.py          # writes the file
    python clients/python/scripts/generate_schema.py --check  # exit 1 when stale

Mapping: a ``$ref`` to an object schema is its ``TypedDict``; a ``oneOf`` (the
content block and stream event unions) and an inline object are ``JSON``
(``dict[str, Any]``: the code reads them by their ``type``); ``enum`` is a
``Literal``; ``["integer", "null"]`` is ``int | None``; an object with
``required`` and optional properties is a required base and a ``total=False``
subclass (``NotRequired`` needs Python 3.11); a property named after a Python
keyword (``from``) takes the functional form.
"""

from __future__ import annotations

import json
import keyword
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DOCUMENT = ROOT / "docs" / "openapi.json"
TARGET = ROOT / "clients" / "python" / "src" / "degrau_client" / "_schema.py"

HEADER = '''"""The API's shapes and the clients' retry policy, generated from
``docs/openapi.json`` by ``clients/python/scripts/generate_schema.py``. Do not edit:
change the document and run the script (``tests/test_schema.py`` fails while this
file is stale)."""

# ruff: noqa
from __future__ import annotations

from typing import Any, Literal, TypedDict

JSON = dict[str, Any]
'''

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def _unions(schemas: dict[str, Any]) -> set[str]:
    return {name for name, schema in schemas.items() if "oneOf" in schema or "anyOf" in schema}


def annotation(schema: dict[str, Any], unions: set[str]) -> str:
    """The Python type of a property's schema."""
    if "$ref" in schema:
        path = schema["$ref"].split("/")
        # Only a whole schema of components.schemas has a class; a part of one is JSON.
        return "JSON" if len(path) != 4 or path[-1] in unions else path[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            parts = [annotation(part, unions) for part in schema[key]]
            return " | ".join(dict.fromkeys(parts))
    if "const" in schema:
        return f"Literal[{_literal(schema['const'])}]"
    if "enum" in schema:
        values = ", ".join(_literal(v) for v in schema["enum"])
        return f"Literal[{values}]"
    kind = schema.get("type")
    if isinstance(kind, list):
        parts = [annotation({**schema, "type": k}, unions) for k in kind if k != "null"]
        return " | ".join(parts) + (" | None" if "null" in kind else "")
    if kind == "null":
        return "None"
    if kind == "array":
        return f"list[{annotation(schema.get('items', {}), unions)}]"
    if kind == "object" or "properties" in schema:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and "properties" not in schema:
            return f"dict[str, {annotation(extra, unions)}]"
        return "JSON"
    return SCALARS.get(kind, "Any") if isinstance(kind, str) else "Any"


def _docstring(text: str, indent: str) -> list[str]:
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = textwrap.wrap(text, 84 - len(indent), break_on_hyphens=False) or [""]
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}', *(indent + line for line in lines[1:]), f'{indent}"""']


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}#: {line}" for line in textwrap.wrap(text, 84 - len(indent), break_on_hyphens=False)]


def _quoted(text: str) -> str:
    return f"'{text}'" if '"' in text else f'"{text}"'


def typed_dict(name: str, schema: dict[str, Any], unions: set[str]) -> list[str]:
    """The class (or classes) of one object schema."""
    properties: dict[str, Any] = schema.get("properties", {})
    required = [p for p in properties if p in schema.get("required", [])]
    optional = [p for p in properties if p not in required]
    description = schema.get("description", f"``{name}``.")

    def fields(names: list[str]) -> list[str]:
        out: list[str] = []
        for prop in names:
            if "description" in properties[prop]:
                out.extend(_comment(properties[prop]["description"], "    "))
            out.append(f"    {prop}: {annotation(properties[prop], unions)}")
        return out

    if any(keyword.iskeyword(p) or not p.isidentifier() for p in properties):
        if required and optional:
            raise SystemExit(f"{name}: a keyword property and optional ones: not supported")
        # Each annotation a string literal, in single quotes when it holds double
        # ones (a Literal's values), as ruff's formatter writes it.
        items = ", ".join(f'"{p}": {_quoted(annotation(properties[p], unions))}' for p in properties)
        total = "" if required else ", total=False"
        return [*_comment(description, ""), f'{name} = TypedDict("{name}", {{{items}}}{total})']
    if required and optional:
        base = f"_{name}Required"
        return [
            f"class {base}(TypedDict):",
            *fields(required),
            "",
            "",
            f"class {name}({base}, total=False):",
            *_docstring(description, "    "),
            "",
            *fields(optional),
        ]
    total = "" if required or not properties else ", total=False"
    body = fields(required or optional) or ["    pass"]
    return [f"class {name}(TypedDict{total}):", *_docstring(description, "    "), "", *body]


def generate(document: dict[str, Any]) -> str:
    schemas: dict[str, Any] = document["components"]["schemas"]
    unions = _unions(schemas)
    out = [HEADER]
    for name, schema in schemas.items():
        if name in unions:
            kinds = ", ".join(p["$ref"].rsplit("/", 1)[-1] for p in schema.get("oneOf", []) if "$ref" in p)
            out += ["", ""]
            out.extend(_comment(f"A ``oneOf`` ({kinds or 'see the document'}): read by its ``type``.", ""))
            out.append(f"{name} = JSON")
            continue
        out.append("")
        out.append("")
        out.extend(typed_dict(name, schema, unions))
    types = schemas["Error"]["properties"]["error"]["properties"]["type"]["enum"]
    policy = document["x-degrau-retry"]
    out += [
        "",
        "",
        "#: Every error type of the envelope (``components.schemas.Error``).",
        "ERROR_TYPES: tuple[str, ...] = (",
        *(f'    "{t}",' for t in types),
        ")",
        "",
        "#: ``x-degrau-retry``: how the clients try a call again (see its description in",
        "#: the document).",
        "RETRY_POLICY: JSON = " + _literal({k: v for k, v in policy.items() if k != "description"}),
        "",
    ]
    return "\n".join(out)


def _literal(value: Any, indent: str = "") -> str:
    """A Python literal of JSON data, one entry a line."""
    inner = indent + "    "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {_literal(v, inner)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v, inner) for v in value) + "]"
    if isinstance(value, bool):
        return "True" if value else "False"
    return "None" if value is None else json.dumps(value)


def main() -> int:
    text = generate(json.loads(DOCUMENT.read_text()))
    if sys.argv[1:] == ["--check"]:
        stale = not TARGET.exists() or TARGET.read_text() != text
        if stale:
            print(f"{TARGET} is stale: run {Path(__file__).name}", file=sys.stderr)
        return int(stale)
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
