"""docs/ names only what exists: every test and module that docs/GUARANTEES.md cites as keeping or proving
a guarantee."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_guarantees_cite_existing_tests_and_modules():
    doc = (ROOT / "docs" / "GUARANTEES.md").read_text()
    assert [int(n) for n in re.findall(r"^## (\d)\. ", doc, re.M)] == [1, 2, 3, 4, 5, 6]
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    named = set(re.findall(r"`(?:[\w/]+\.py::)?(test_\w+)`", doc))
    assert named and not [n for n in named if f"def {n}(" not in tests]
    paths = set(re.findall(r"`((?:autograder|measure|tools|probes|tests)/[\w/]+\.py)", doc))
    assert paths and not [p for p in paths if not (ROOT / p).exists()]


def test_every_document_a_notebook_or_the_readme_names_exists():
    """A learner sent to `docs/X.md` (or any .md file) by the README, docs/ or a notebook finds it here."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    basenames = {pathlib.PurePosixPath(p).name for p in tracked}
    sources = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "solutions").glob("*/*.ipynb"),
               *(ROOT / "notebooks").glob("*/*.ipynb")]
    missing = []
    for src in sources:
        text = re.sub(r"https?://\S+", "", src.read_text())  # links to other sites are not the repository's
        for name in set(re.findall(r"[\w./-]*\w\.md\b", text)):
            found = (ROOT / name).exists() or (src.parent / name).exists() if "/" in name else name in basenames
            if not found:
                missing.append(f"{src.relative_to(ROOT)} names {name}")
    assert not missing, missing


def test_adding_an_exercise_names_only_real_files_and_functions():
    """Every step of the checklist names at least one file, and every `path` or `path:name` it names exists
    (the name defined in that file), so the checklist moves when the code does."""
    doc = (ROOT / "docs" / "adding-an-exercise.md").read_text()
    steps = re.findall(r"^\d+\. (.*?)(?=^\d+\. |\Z)", doc, re.M | re.S)
    assert len(steps) >= 8
    wrong = []
    for number, step in enumerate(steps, 1):
        refs = re.findall(r"`([\w./-]+\.(?:py|md|ipynb|toml)|Makefile)(?::(\w+))?`", step)
        if not refs:
            wrong.append(f"step {number} names no file")
        for path, name in refs:
            file = ROOT / path
            if not file.exists():
                wrong.append(f"step {number}: {path} does not exist")
            elif name and not re.search(rf"^\s*(?:def|class) {name}\b|^{name}\b.*=", file.read_text(), re.M):
                wrong.append(f"step {number}: {path} defines no {name}")
    assert not wrong, wrong
