"""What of a transform's source enters its job version (``domain.versions.code_text``): what runs,
not its comments, layout or docstrings."""

from __future__ import annotations

from lotline.domain.versions import code_text

BASE = """
def parse(raw):
    return raw.filter(raw.status == 200)
"""


def test_comments_docstrings_and_layout_change_nothing() -> None:
    explained = '''
    def parse(raw):
        """Only the hits that were served."""

        # 200: served
        return raw.filter(raw.status  ==  200)   # as it came
    '''
    assert code_text(explained) == code_text(BASE)


def test_nested_docstrings_change_nothing_and_a_function_of_only_a_docstring_stays_valid() -> None:
    inner = 'def parse(raw):\n    def keep(row):\n        """Served."""\n    return raw\n'
    assert code_text(inner) == code_text(
        "def parse(raw):\n    def keep(row):\n        pass\n    return raw\n"
    )


def test_what_runs_changes_the_text() -> None:
    assert code_text(BASE.replace("200", "404")) != code_text(BASE)
    assert code_text(BASE.replace("return raw", "return raw.limit(1)\n    return raw")) != code_text(BASE)
    # A string that is not a docstring is code.
    assert code_text(BASE.replace("return", "'x'\n    return")) == code_text(BASE)  # a docstring
    assert code_text(BASE.replace("return raw", "x = 'y'\n    return raw")) != code_text(BASE)


def test_source_that_does_not_parse_alone_enters_as_it_is() -> None:
    cut = '    checks=[check("positive", lambda df: df.count() > 0),\n'
    assert code_text(cut) == cut
