import subprocess
import sys
from pathlib import Path

import pytest

from envs.errors import ConfigError
from launch.launch_file import load_launch_file

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_xml_args_lets_groups_conditions_and_substitutions(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBODIA_TEST_SEED", "7")
    f = _write(tmp_path, "a.launch.xml", """
<launch>
  <arg name="episodes" default="3"/>
  <arg name="fast" default="true"/>
  <let name="double" value="$(eval '$(var episodes) * 2')"/>
  <set_env name="CI" value="true"/>
  <group if="$(var fast)">
    <let name="inner" value="x"/>
    <node pkg="embodia" exec="eval" name="e1">
      <param name="env" value="classic_control"/>
      <param name="episodes" value="$(var double)"/>
      <param name="seed" value="$(env EMBODIA_TEST_SEED)"/>
      <param name="resume" value="false"/>
    </node>
  </group>
  <node pkg="embodia" exec="eval" name="e2" unless="$(var fast)" args="--list"/>
  <node pkg="embodia" exec="leaderboard" name="b" args="$(dirname)/out"/>
</launch>""")
    nodes = load_launch_file(f)
    assert [n.name for n in nodes] == ["e1", "b"]
    assert nodes[0].argv == ["--env", "classic_control", "--episodes", "6", "--seed", "7"]
    assert nodes[0].env == {"CI": "true"}
    assert nodes[1].argv == [f"{tmp_path}/out"]
    slow = load_launch_file(f, {"fast": "false", "episodes": "1"})
    assert [n.name for n in slow] == ["e2", "b"]


def test_include_passes_args_and_yaml_matches_xml(tmp_path):
    _write(tmp_path, "inner.launch.yaml", """
launch:
  - arg: {name: n}
  - node: {pkg: embodia, exec: eval, name: inner, param: [{name: episodes, value: "$(var n)"}]}
""")
    outer = _write(tmp_path, "outer.launch.xml",
                   '<launch><include file="inner.launch.yaml"><arg name="n" value="4"/></include></launch>')
    (node,) = load_launch_file(outer)
    assert node.name == "inner" and node.argv == ["--episodes", "4"]


@pytest.mark.parametrize("text,needle", [
    ("<launch><node pkg='embodia' exec='eval' colour='red'/></launch>", "colour"),
    ("<launch><node pkg='ros' exec='eval'/></launch>", "'ros'"),
    ("<launch><node pkg='embodia' exec='fly'/></launch>", "'fly'"),
    ("<launch><bogus/></launch>", "<bogus>"),
    ("<launch><arg name='x'/></launch>", "'x'"),
    ("<launch><node pkg='embodia' exec='eval' args='$(var nope)'/></launch>", "nope"),
    ("<launch><let name='a' value=\"$(eval __import__('os'))\"/></launch>", "eval"),
    ("<launch><node", "malformed"),
])
def test_malformed_files_raise_config_errors(tmp_path, text, needle):
    f = _write(tmp_path, "bad.launch.xml", text)
    with pytest.raises(ConfigError, match=None) as err:
        load_launch_file(f)
    assert needle in str(err.value)


def test_shipped_launch_files_resolve_and_cli_exit_codes(tmp_path):
    for f in sorted((ROOT / "launch" / "files").glob("*.launch.*")):
        assert load_launch_file(f), f
    run = [sys.executable, "-m", "launch.run"]
    ok = subprocess.run([*run, "launch/files/demo_cartpole.launch.yaml", "episodes:=2", f"out:={tmp_path}/d"],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "d" / "leaderboard.html").exists()
    bad = subprocess.run([*run, "launch/files/demo_cartpole.launch.yaml", "nope:=1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "nope" in bad.stderr
