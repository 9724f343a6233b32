"""Who the report speaks to: a hosted page names query parameters, the command names its flags.

How this works: the same templates lay out the same record; ``Voice`` only
supplies the words that depend on where the report is read (``this page`` or
``this report``, ``clock=real`` or ``--clock real``) and whether a live
server stands behind the page (then a stream can be watched at ``/live``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COMMAND", "PAGE", "Voice"]


@dataclass(frozen=True, slots=True)
class Voice:
    """command: printed by ``tokenwire report`` (flags) rather than served (query parameters);
    served_live: served by ``tokenwire serve``, where ``/live`` streams the same answer."""

    command: bool = False
    served_live: bool = False

    def __post_init__(self) -> None:
        if self.command and self.served_live:
            raise ValueError("a report is printed by the command or served live, not both; got both")

    @property
    def this(self) -> str:
        """``this page`` or ``this report``."""
        return "this report" if self.command else "this page"

    @property
    def This(self) -> str:  # noqa: N802 - the capitalised form, for the start of a sentence
        return "This report" if self.command else "This page"

    def setting(self, name: str, value: object) -> str:
        """``clock=real`` on a page, ``--clock real`` for the command."""
        return f"--{name.replace('_', '-')} {value}" if self.command else f"{name}={value}"

    @property
    def same_input(self) -> str:
        """What makes a virtual report repeat itself byte for byte."""
        return "the same flags print the same bytes" if self.command else "the same URL gives the same bytes"


PAGE, COMMAND = Voice(), Voice(command=True)
