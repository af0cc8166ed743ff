"""The lean import of mcp_types (``mcpsync._typesimport``): what the cold path leaves out
changes nothing a program sees — importlib.metadata works for anyone who asks, during the
import and after, and pydantic's plugins load as before when one is installed.

Each case runs in a fresh interpreter: the test process has importlib.metadata and
pydantic loaded already."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from mcpsync import _typesimport


def _run(code: str, env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout.strip()


def test_a_session_never_imports_importlib_metadata_and_pydantic_still_can():
    out = _run(
        """
        import sys, mcpsync
        with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
            assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
            assert s.server_info.name  # built on first read
        assert "importlib.metadata" not in sys.modules, "the cold path imported it"
        import importlib
        assert "metadata" not in vars(importlib)
        from pydantic.plugin import _loader
        assert _loader._plugins == {}  # no plugin here: the empty answer, given early
        import pydantic, pydantic.networks
        # pydantic.networks' version() (its EmailStr check) still answers, from the real module
        assert pydantic.networks.version("pydantic") == pydantic.VERSION
        real = sys.modules["importlib.metadata"]
        assert type(real).__name__ == "module" and callable(real.distributions)
        import importlib.metadata
        assert importlib.metadata is real
        print("ok")
        """
    )
    assert out == "ok"


def test_another_thread_gets_a_working_importlib_metadata_while_the_import_runs():
    out = _run(
        """
        import sys, threading
        from mcpsync import _typesimport
        got = {}
        with _typesimport.metadata_later():
            standin = sys.modules["importlib.metadata"]
            def other():
                import importlib.metadata._meta  # a submodule imports as usual
                from importlib.metadata import version, PackageNotFoundError
                import importlib.metadata as md
                got["version"] = version("pydantic")
                got["dists"] = sum(1 for _ in md.distributions())
                try:
                    version("surely-not-installed-xyz")
                except PackageNotFoundError:
                    got["missing"] = True
            t = threading.Thread(target=other)
            t.start(); t.join(60)
        import importlib.metadata, pydantic
        assert got["version"] == pydantic.VERSION and got["dists"] > 5 and got["missing"]
        assert importlib.metadata is not standin
        assert sys.modules["importlib.metadata"] is importlib.metadata
        assert callable(importlib.metadata.packages_distributions)
        print("ok")
        """
    )
    assert out == "ok"


def test_the_stand_in_leaves_when_nobody_used_it():
    out = _run(
        """
        import sys, importlib
        from mcpsync import _typesimport
        with _typesimport.metadata_later():
            assert type(sys.modules["importlib.metadata"]).__name__ == "_StandIn"
            from importlib.metadata import version  # the lazy one: nothing imported yet
            assert type(sys.modules["importlib.metadata"]).__name__ == "_StandIn"
        assert "importlib.metadata" not in sys.modules and "metadata" not in vars(importlib)
        import pydantic
        assert version("pydantic") == pydantic.VERSION  # imports the real module now
        assert type(sys.modules["importlib.metadata"]).__name__ == "module"
        print("ok")
        """
    )
    assert out == "ok"


def test_metadata_imported_already_is_left_alone():
    out = _run(
        """
        import sys, importlib.metadata as real
        from mcpsync import _typesimport
        with _typesimport.metadata_later():
            assert sys.modules["importlib.metadata"] is real
        assert sys.modules["importlib.metadata"] is real
        print("ok")
        """
    )
    assert out == "ok"


def _plugin_dist(site: Path, group: str = "pydantic") -> None:
    """A distribution on ``site`` declaring one pydantic plugin that records its calls."""
    (site / "probeplugin.py").write_text(
        textwrap.dedent(
            """
            import os
            SEEN = []
            class Plugin:
                def new_schema_validator(self, schema, schema_type, schema_type_path,
                                         schema_kind, config, plugin_settings):
                    SEEN.append(schema_type_path.name)
                    return None, None, None
            plugin = Plugin()
            """
        )
    )
    info = site / "probeplugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probeplugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\nprobe = probeplugin:plugin\n")


def test_an_installed_pydantic_plugin_is_still_loaded_and_called(tmp_path: Path):
    """The early answer is given only when no plugin is installed: with one, pydantic
    searches itself and the plugin sees the validators mcpsync builds."""
    _plugin_dist(tmp_path)
    out = _run(
        """
        import sys, mcpsync
        with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
            s.call_tool("echo", {"message": "hi"})
        import probeplugin
        assert "CallToolResult" in probeplugin.SEEN, probeplugin.SEEN
        print("ok")
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert out == "ok"


def test_a_plugin_of_another_group_does_not_stop_the_early_answer(tmp_path: Path):
    _plugin_dist(tmp_path, group="console_scripts")
    assert not _typesimport._any_pydantic_entry_point([str(tmp_path)])
    _plugin_dist_other = tmp_path / "other"
    _plugin_dist_other.mkdir()
    _plugin_dist(_plugin_dist_other, group=" pydantic ")  # spaces: taken as the group
    assert _typesimport._any_pydantic_entry_point([str(tmp_path), str(_plugin_dist_other)])


def test_egg_info_folders_are_read_too(tmp_path: Path):
    info = tmp_path / "old.egg-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[console_scripts]\na = b:c\n\n[pydantic]\np = q:r\n")
    assert _typesimport._any_pydantic_entry_point([str(tmp_path)])
    (info / "entry_points.txt").write_text("[console_scripts]\npydantic = b:c\n")
    assert not _typesimport._any_pydantic_entry_point([str(tmp_path)])


@pytest.mark.parametrize("kind", ["zip", "egg"])
def test_a_zip_or_egg_on_the_path_leaves_the_search_to_pydantic(tmp_path: Path, kind: str):
    if kind == "zip":
        entry = tmp_path / "bundle.zip"
        with zipfile.ZipFile(entry, "w") as z:
            z.writestr("x.py", "")
    else:
        entry = tmp_path / "thing-1.0.egg"
        entry.mkdir()
    assert _typesimport._any_pydantic_entry_point([str(tmp_path / "missing"), str(entry)])
    assert not _typesimport._any_pydantic_entry_point([str(tmp_path / "missing")])


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"PYDANTIC_DISABLE_PLUGINS": "probe"}, None),  # pydantic reads it itself, each time
        ({}, {}),
    ],
)
def test_settle_plugins_only_answers_when_it_knows(env: dict[str, str], expected):
    out = _run(
        """
        from mcpsync import _typesimport
        import pydantic
        _typesimport.settle_plugins()
        from pydantic.plugin import _loader
        print(repr(_loader._plugins))
        """,
        env=env,
    )
    assert out == repr(expected)


def test_a_finder_that_finds_distributions_its_own_way_leaves_the_search_to_pydantic():
    out = _run(
        """
        import sys
        class Finder:
            def find_spec(self, *a, **k):
                return None
            def find_distributions(self, context=None):
                return iter(())
        sys.meta_path.append(Finder())
        from mcpsync import _typesimport
        import pydantic
        _typesimport.settle_plugins()
        from pydantic.plugin import _loader
        print(repr(_loader._plugins))
        """
    )
    assert out == "None"
