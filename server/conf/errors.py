"""The one exception a bad configuration raises.

nats-server reports configuration problems as ``file:line:col: reason`` (its ``configErr``); Skiff does the same so
a person sees where the file is wrong instead of a traceback.  ``line`` and ``col`` are 1-based.
"""
from __future__ import annotations


class ConfigError(Exception):
    """A configuration file (or flag) could not be read, parsed or mapped to options."""

    def __init__(
        self,
        reason: str,
        file: str | None = None,
        line: int | None = None,
        col: int | None = None,
        errors: "list[ConfigError] | None" = None,
    ):
        self.reason = reason
        self.file = file
        self.line = line
        self.col = col
        #: every problem found when there were several (nats-server reports them all at once)
        self.errors: list[ConfigError] = errors or [self]
        super().__init__(str(self))

    @classmethod
    def combine(cls, errors: "list[ConfigError]") -> "ConfigError":
        """One error for several: the first one's location, all messages one per line."""
        if len(errors) == 1:
            return errors[0]
        first = errors[0]
        return cls(first.reason, first.file, first.line, first.col, errors=list(errors))

    @property
    def location(self) -> str:
        """``file:line:col`` (the parts that are known), or ``""``."""
        parts = [self.file or ("<string>" if self.line is not None else "")]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(p for p in parts if p)

    def __str__(self) -> str:
        if len(self.errors) > 1:
            return "\n".join(str(e) for e in self.errors)
        loc = self.location
        return f"{loc}: {self.reason}" if loc else self.reason
