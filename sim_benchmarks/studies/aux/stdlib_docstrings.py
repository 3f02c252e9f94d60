"""Real retrieval pairs offline: docstrings of the Python standard library, grouped into seven domains.

Every public module, class, function and method docstring of the listed modules (first occurrence of each text) is
split into its first sentence (the query) and the rest (the document). Pairs whose query has fewer than 5 words or
whose document has fewer than 8 are dropped. The texts are whatever the running Python ships, so the pairs depend
on the Python version (recorded by the study).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import warnings

DOMAINS: dict[str, tuple[str, ...]] = {
    "text": ("string", "re", "textwrap", "difflib", "unicodedata", "codecs", "html", "html.parser", "shlex", "locale",
             "gettext", "csv", "configparser"),
    "numeric": ("math", "cmath", "decimal", "fractions", "random", "statistics", "numbers"),
    "containers": ("collections", "heapq", "bisect", "array", "enum", "copy", "dataclasses", "functools",
                   "itertools", "types", "weakref", "graphlib", "typing", "contextlib"),
    "files": ("os", "pathlib", "shutil", "glob", "fnmatch", "tempfile", "filecmp", "io", "zipfile", "tarfile", "gzip",
              "bz2", "lzma", "mmap"),
    "internet": ("socket", "ssl", "http.client", "http.server", "http.cookiejar", "urllib.request", "urllib.parse",
                 "email.message", "email.utils", "smtplib", "ftplib", "imaplib", "poplib", "xmlrpc.client",
                 "ipaddress", "mimetypes", "json", "base64"),
    "concurrency": ("threading", "multiprocessing.pool", "multiprocessing.managers", "concurrent.futures",
                    "asyncio.events", "asyncio.tasks", "asyncio.streams", "asyncio.queues", "asyncio.locks",
                    "subprocess", "queue", "sched", "selectors"),
    "devtools": ("unittest.case", "unittest.mock", "doctest", "pdb", "bdb", "trace", "timeit", "cProfile", "pstats",
                 "inspect", "dis", "ast", "tokenize", "traceback", "warnings", "logging", "argparse"),
}

# A sentence ends at . ! ? followed by space and a capital, bracket or quote (so "e.g. foo" does not split).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`'\"])")


def split_docstring(doc: str) -> tuple[str, str] | None:
    """(first sentence, rest) of a docstring with whitespace collapsed, or None for a single sentence."""
    parts = _SENTENCE_END.split(re.sub(r"\s+", " ", doc).strip(), maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _members(module) -> list[object]:
    """The module, its public objects defined in it (sorted by name) and their public callables."""
    out: list[object] = [module]
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        out.append(obj)
        if inspect.isclass(obj):
            for sub_name, sub in sorted(vars(obj).items()):
                if not sub_name.startswith("_") and (callable(sub) or isinstance(sub, (staticmethod, classmethod))):
                    out.append(sub.__func__ if isinstance(sub, (staticmethod, classmethod)) else sub)
    return out


@functools.cache
def docstring_pairs(domain: str) -> tuple[tuple[str, str], ...]:
    """All (query, document) pairs of one domain, in a fixed order."""
    if domain not in DOMAINS:
        raise KeyError(f"unknown domain {domain!r}; known: {', '.join(DOMAINS)}")
    seen: set[str] = set()
    pairs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few modules warn on import (deprecations), irrelevant here
        for name in DOMAINS[domain]:
            for obj in _members(importlib.import_module(name)):
                doc = inspect.getdoc(obj)
                if not doc or doc in seen:
                    continue
                seen.add(doc)
                split = split_docstring(doc)
                if split and len(split[0].split()) >= 5 and len(split[1].split()) >= 8:
                    pairs.append(split)
    return tuple(pairs)
