"""The environment of sandboxed code: built from nothing, never copied from the parent, so no key or token set
there can reach the code."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from agentgrad.sandbox.errors import SandboxConfigError

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE"
                     r"|^(OPENAI|ANTHROPIC|AWS|AZURE|GOOGLE|GCLOUD|GH|GITHUB|GITLAB|HF|HUGGING|MISTRAL|COHERE|GROQ"
                     r"|TOGETHER|DEEPSEEK|GEMINI|XAI|OPENROUTER)_", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def looks_secret(name: str) -> bool:
    """The variable's name suggests it holds a credential (`*_KEY`, `*_TOKEN`, `*SECRET*`, `OPENAI_*`, ...)."""
    return _SECRET.search(name) is not None


def check_extra(extra: Mapping[str, str]) -> dict[str, str]:
    """The extra variables a sandbox was given, checked: plain names, text values, nothing that looks secret."""
    checked = {}
    for name, value in extra.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise SandboxConfigError(f"environment variable name {name!r} is not a plain name")
        if not isinstance(value, str) or "\0" in value:
            raise SandboxConfigError(f"environment variable {name} must be text without NUL bytes")
        if looks_secret(name):
            raise SandboxConfigError(f"environment variable {name} looks like a credential; sandboxed code never "
                                     "gets one (rename it if it is not)")
        checked[name] = value
    return checked


def clean_environment(workdir: str, python: str, extra: Mapping[str, str]) -> dict[str, str]:
    """PATH (the interpreter's directory first), a UTF-8 locale, HOME and TMPDIR in the working directory, and the
    checked `extra` variables; nothing else."""
    base = {"PATH": f"{os.path.dirname(python)}:{SYSTEM_PATH}", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": workdir, "TMPDIR": workdir, "PWD": workdir}
    return {**base, **extra}
