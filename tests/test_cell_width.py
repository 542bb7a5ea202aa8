"""Terminal cells of table text (report/columns.py's display_width and cut), held against their
definition: East Asian wide and full-width characters two cells, combining characters none,
the rest one; a cut text the longest start that fits with its ellipsis."""
import unicodedata

from hypothesis import given, settings, strategies as st

from helpers import examples
from rmqtool.report.columns import cut, display_width

# letters of every width: ASCII, wide CJK, full-width forms, combining marks, the replacement character
TEXT = st.text(alphabet=st.one_of(st.characters(max_codepoint=0x7f), st.sampled_from("漢字テスト한글ＡＢ\u0301\u0308\ufffd€é")),
               max_size=60)


def cells(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in s)


@settings(max_examples=examples(150))
@given(TEXT, st.integers(min_value=1, max_value=50))
def test_width_and_cut_are_their_definition(s, width):
    assert display_width(s) == cells(s)
    got = cut(s, width)
    if cells(s) <= width:
        assert got == s
        return
    assert got.endswith("…") and s.startswith(got[:-1])
    head = got[:-1]
    assert cells(head) <= width - 1
    assert len(head) == len(s) or cells(s[:len(head) + 1]) > width - 1  # no longer start fits
