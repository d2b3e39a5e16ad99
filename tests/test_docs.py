"""Every ```python block in docs/*.md and README.md runs, in order, one namespace per file."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parent.parent
DOCS = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md", ROOT / "README-package.md"]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_doc_snippets_run(path):
    namespace = {"__name__": f"docs_{path.stem}"}
    blocks = BLOCK.findall(path.read_text())
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{path.name}[block {i}]", "exec"), namespace)
        except Exception as e:  # pragma: no cover - the message is the point
            raise AssertionError(f"{path.name}, python block {i} failed: {e!r}\n{code}") from e


def test_the_package_description_has_no_relative_link():
    """README-package.md is the package index's page, where a link into docs/ cannot resolve."""
    text = (ROOT / "README-package.md").read_text()
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert [t for t in targets if "://" not in t] == []
