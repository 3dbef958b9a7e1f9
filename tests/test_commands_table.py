"""The command table: every command is one module of rooflab/commands/ with its parser and its main,
cli.py only assembles them, and a new command is one module and one line in COMMANDS."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rooflab import cli
from rooflab.command_setup import setup
from rooflab.commands import COMMANDS
from rooflab.errors import RooflabError


def test_every_command_is_a_module_with_its_parser_and_its_main():
    for name, module in COMMANDS.items():
        assert module.__name__ == f"rooflab.commands.{name}"
        assert callable(module.add_parser) and callable(module.main) and module.HELP
    sub = cli.build_parser()._subparsers._group_actions[0]
    assert list(sub.choices) == list(COMMANDS)  # the help lists them in the table's order


def test_a_new_command_is_one_module_and_one_line(monkeypatch, capsys):
    def add_parser(sub):
        sub.add_parser("hello", help="says hello").add_argument("--to", default="world")

    def main(args):
        print(f"hello {args.to}")
        return 7

    monkeypatch.setitem(COMMANDS, "hello", SimpleNamespace(add_parser=add_parser, main=main, HELP="says hello"))
    assert cli.main(["hello", "--to", "rooflab"]) == 7
    assert capsys.readouterr().out == "hello rooflab\n"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_answers_help(name, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([name, "--help"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith(f"usage: rooflab {name}")


def test_place_and_llm_take_a_gpu_index_like_run():
    p = cli.build_parser()
    for argv in (["run"], ["place", "ops.json"], ["llm", "gpt2"]):
        assert p.parse_args([*argv, "--gpu", "1"]).gpu == 1


def test_the_setup_refuses_bad_choices_before_anything_is_written(tmp_path, monkeypatch):
    with pytest.raises(RooflabError, match="unknown device 'tpu'"):
        setup("tpu", out=tmp_path / "a")
    with pytest.raises(RooflabError, match="threads"):
        setup("cpu", threads=10_000, out=tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    monkeypatch.setenv("ROOFLAB_MACHINE", "bench-7")
    s = setup("cpu", threads=1, out=tmp_path / "c", quick=True)
    assert s.machine_id == "bench-7" and s.threads == 1 and s.quick and (tmp_path / "c").is_dir()
    d = s.description()
    d["id"] = "changed"  # each result file gets its own copy
    assert s.machine_id == "bench-7"
