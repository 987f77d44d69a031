"""The manual (docs/, built by mkdocs) and README.md say only what exists: every `labctl`
command and verb they show is one labctl has, every page is in the site's navigation, every
bench script they name is in bench/ and every bench script is named where its figures are."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from ruamel.yaml import YAML

from harness.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def code(text: str) -> list[str]:
    """What a page shows as code: the lines of its fenced blocks and its inline spans."""
    blocks = re.findall(r"(?ms)^```[^\n]*\n(.*?)^```", text)
    prose = re.sub(r"(?ms)^```.*?^```", "", text)
    return [line for block in blocks for line in block.splitlines()] + \
        re.findall(r"`([^`\n]+)`", prose)


def shown_commands(text: str) -> list[list[str]]:
    """`labctl ...` as the pages show it, cut at a comment."""
    found = []
    for snippet in code(text):
        for match in re.finditer(r"(?:^|[\s$(])(?:\.venv/bin/)?labctl ([^#]*)", snippet):
            words = match.group(1).replace("\\|", "|").split()
            try:
                found.append(shlex.split(" ".join(words)))
            except ValueError:
                found.append(words)
    return found


def unknown_commands(text: str, parser: argparse.ArgumentParser) -> list[str]:
    """Commands the page shows that labctl lacks; a verb is checked where the command has
    verbs and the page names one (a lower-case word among the first three after it)."""
    commands = subcommands(parser)
    unknown = []
    for words in shown_commands(text):
        if not words or words[0].startswith("-"):
            continue
        command = commands.get(words[0])
        if command is None:
            unknown.append(words[0])
            continue
        verbs = subcommands(command)
        if not verbs:
            continue
        named = [w for w in words[1:4] if re.fullmatch(r"[a-z][a-z0-9-]*", w) and w in verbs]
        guesses = [w for w in words[1:4] if re.fullmatch(r"[a-z]+(-[a-z]+)+", w)]
        unknown += [f"{words[0]} {w}" for w in guesses if w not in verbs and not named]
    return unknown


def test_every_command_the_pages_show_exists() -> None:
    parser = build_parser()
    for page in PAGES:
        missing = unknown_commands(page.read_text(), parser)
        assert not missing, f"{page.relative_to(REPO)} shows labctl commands it lacks: {missing}"


def test_the_check_finds_a_command_labctl_lacks() -> None:
    parser = build_parser()
    assert unknown_commands("run `labctl teleport lab1` then", parser) == ["teleport"]
    assert unknown_commands("```\nlabctl fault clos link-sever a--b\n```", parser) == \
        ["fault link-sever"]
    assert unknown_commands("`labctl fault clos link-down a--b`", parser) == []


def test_every_page_is_in_the_sites_navigation() -> None:
    config = YAML(typ="safe").load((REPO / "mkdocs.yml").read_text())

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        items = nav.values() if isinstance(nav, dict) else nav
        return [p for item in items for p in pages(item)]  # type: ignore[union-attr]

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert listed == on_disk


def test_bench_scripts_are_named_where_their_figures_are() -> None:
    text = "\n".join(page.read_text() for page in PAGES)
    named = set(re.findall(r"bench/([a-z0-9_]+\.py)", text))
    scripts = {p.name for p in (REPO / "bench").glob("*.py")}
    assert named <= scripts, f"named but missing: {sorted(named - scripts)}"
    assert scripts <= named, f"figures nowhere in the manual: {sorted(scripts - named)}"


def test_the_readme_is_a_newcomers_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    assert "make lab" in readme and "make test" in readme
