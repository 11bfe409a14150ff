"""Structured output for the recipes' reflector calls: a ``response_format`` that asks for one JSON object.

Several released methods ask their model for a JSON object (ADAS's meta agent always, ACE with ``--json_mode``).
A large model writes one when told to; a small one often does not, or runs past its token limit mid-string. A
``json_schema`` naming every field, each string bounded in length, lets a server that constrains decoding to the
schema (llama.cpp, the embedded local model, OpenAI-compatible servers) return an object the recipe's parser
reads, within a small token limit. Not strict: OpenAI's strict mode refuses length bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def json_format(name: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """A ``response_format`` asking for a JSON object with every one of `properties` and no other field."""
    schema = {"type": "object", "properties": dict(properties), "required": list(properties),
              "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": name, "strict": False, "schema": schema}}


def text_field(most: int) -> dict[str, Any]:
    """A string of at most `most` characters: the bounds keep a whole reply within a small token limit."""
    return {"type": "string", "maxLength": most}


def asked(shape: dict[str, Any], json_mode: bool) -> dict[str, Any] | None:
    """The extra parameters of one reflector call: `shape` as its ``response_format`` in JSON mode, else none."""
    return {"response_format": shape} if json_mode else None
