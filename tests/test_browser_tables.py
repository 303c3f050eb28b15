"""labkit_dev.browser.wide_tables on hand-written pages in headless Chromium at 1280x800: each table wider than the box
showing it is caught, with the columns it hides; a table that fits, or wraps to fit, is not."""

import ast

import pytest

from labkit_dev import browser

pytestmark = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "")

#: An output area as JupyterLab draws one at 1280x800 (848 px, scrolling sideways), holding ``{}``.
OUTPUT = '<div style="width: 848px; overflow: auto; padding: 0 4px">{}</div>'


def table(columns: list[str], cell: str, nowrap: bool = True) -> str:
    """A DataFrame-like table: a header of ``columns``, one row of ``cell`` in each."""
    style = ' style="white-space: nowrap"' if nowrap else ""
    return (f"<table><thead><tr>{''.join(f'<th{style}>{c}</th>' for c in columns)}</tr></thead>"
            f"<tbody><tr>{''.join(f'<td{style}>{cell}</td>' for _ in columns)}</tr></tbody></table>")


@pytest.fixture(scope="module")
def page():
    with browser.chromium() as page:
        yield page


def problems(page, body: str) -> list[str]:
    page.set_content(f"<html><body style='margin: 0'>{body}</body></html>")
    return browser.wide_tables(page.locator("body").element_handle(), where="cell 22")


WIDE, WIDER = [f"rule {i}" for i in range(8)], [f"rule {i}" for i in range(12)]


def hidden(sentence: str) -> list[str]:
    """The columns a sentence of :func:`labkit_dev.browser.wide_tables` names."""
    return ast.literal_eval(sentence.split("hides its columns ")[1].split(" past")[0])


@pytest.mark.parametrize("body, columns", [
    (OUTPUT.format(table(WIDE, "UNKNOWN_MEMBER_ID")), WIDE),  # 05's cell 22 as the lab drew it: 8 such columns
    (OUTPUT.replace("auto", "hidden").format(table(WIDE, "UNKNOWN_MEMBER_ID")), WIDE),  # clipped, not scrolled
    (table(WIDER, "UNKNOWN_MEMBER_ID"), WIDER),  # in no box: the 1280 px window's edge
])
def test_a_table_wider_than_its_box_is_caught_with_the_columns_it_hides(page, body, columns):
    found = problems(page, body)
    assert len(found) == 1 and found[0].startswith("cell 22 a table "), found
    assert hidden(found[0]) and hidden(found[0])[-1] == columns[-1] and columns[0] not in hidden(found[0]), found


@pytest.mark.parametrize("body", [
    OUTPUT.format(table(WIDE[:4], "UNKNOWN_MEMBER_ID")),  # fits
    OUTPUT.format(table(WIDE, "a long answer that wraps at its spaces to fit the column", nowrap=False)),
    OUTPUT.format("<pre>no table here</pre>"),
])
def test_a_table_that_fits_or_wraps_to_fit_is_no_problem(page, body):
    assert problems(page, body) == []
