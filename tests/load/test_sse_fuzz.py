"""The long fuzz of the SSE decoder (``tokenwire.core.sse``): ``$TOKENWIRE_FUZZ_EXAMPLES`` examples (10,000 unless
set), each a wire of SSE-ish bytes cut anywhere and a line bound, decoded to events or an ``SSEError`` only, and to
what the WHATWG reference gives under the default bound.  The fast loop runs the same property briefly
(``unit/test_sse.py``).  It times nothing and starts nothing, so it runs beside the other tests (``alongside``)
rather than alone as the other load tests do."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from support.sse_reference import FUZZ_INPUTS, decoder_raises_only_sse_errors

pytestmark = pytest.mark.alongside

# How many examples the long fuzz draws: $TOKENWIRE_FUZZ_EXAMPLES, else 10,000 (half a minute on 2 cores).
FUZZ_EXAMPLES = int(os.environ.get("TOKENWIRE_FUZZ_EXAMPLES") or 10_000)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(*FUZZ_INPUTS)
def test_long_fuzz_decoder_raises_only_sse_errors(wire: bytes, cuts: list[int], max_line: int) -> None:
    decoder_raises_only_sse_errors(wire, cuts, max_line)
