import os
import stat

import pytest

from labkit.broker import runtime
from labkit.core.errors import JavaError, LabkitError, MavenError


def fake_tool(folder, name, script):
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_no_java_names_the_fix(tmp_path):
    with pytest.raises(JavaError, match="No Java found.*openjdk-17.*LABKIT_BOOTSTRAP"):
        runtime.find_java({"PATH": str(tmp_path)})


def test_old_java_names_its_version_and_the_fix(tmp_path):
    fake_tool(tmp_path, "java", 'echo \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    with pytest.raises(JavaError, match="is Java 11; Kafka 4.x needs Java 17"):
        runtime.find_java({"PATH": str(tmp_path)})


def test_java_8_style_version_is_read_as_8(tmp_path):
    fake_tool(tmp_path, "java", 'echo \'java version "1.8.0_402"\' >&2\n')
    with pytest.raises(JavaError, match="is Java 8;"):
        runtime.find_java({"PATH": str(tmp_path)})


def test_java_home_wins_over_path(tmp_path):
    (tmp_path / "bin").mkdir()
    fake_tool(tmp_path / "bin", "java", 'echo \'openjdk version "21.0.1"\' >&2\n')
    assert runtime.find_java({"JAVA_HOME": str(tmp_path), "PATH": os.environ["PATH"]}) == str(tmp_path / "bin" / "java")


def test_the_machine_java_is_17_or_newer():
    assert runtime.find_java().endswith("java")


def test_no_maven_and_no_cache_names_the_fix(tmp_path):
    env = {"PATH": str(tmp_path), "LABKIT_HOME": str(tmp_path / "home")}
    with pytest.raises(MavenError, match="Maven is not installed.*apt-get install maven.*LABKIT_BOOTSTRAP"):
        runtime.ensure_jars(env, progress=False)


def test_failed_maven_run_leaves_no_half_cache(tmp_path):
    fake_tool(tmp_path, "mvn", "echo '[ERROR] Could not transfer artifact from central'\nexit 1\n")
    env = {"PATH": str(tmp_path), "LABKIT_HOME": str(tmp_path / "home")}
    with pytest.raises(MavenError, match="exit 1(.|\n)*Could not transfer artifact"):
        runtime.ensure_jars(env, progress=False)
    assert runtime.cached_jars(env) is None
    assert not runtime.jar_dir(env).exists()


@pytest.mark.parametrize("version", ["4.4.0", "4.3.2"])
def test_cached_jars_are_the_kafka_closure_with_a_logging_backend(version):
    jars = runtime.ensure_jars(version=version, progress=False)
    assert {p.parent for p in jars} == {runtime.jar_dir(version=version)}  # one cache folder per release
    names = {p.name for p in jars}
    assert f"kafka_2.13-{version}.jar" in names
    assert f"kafka-clients-{version}.jar" in names
    assert any(n.startswith("log4j-slf4j2-impl-2.25") for n in names)
    assert any(n.startswith("log4j-core-2.25") for n in names)
    # slf4j 2 API: with 1.7 the log4j binding is not found and the broker logs nothing
    assert [n for n in names if n.startswith("slf4j-api-")] == ["slf4j-api-2.0.17.jar"]


def test_unknown_release_is_refused_before_maven_runs(tmp_path):
    env = {"PATH": str(tmp_path), "LABKIT_HOME": str(tmp_path / "home")}
    with pytest.raises(LabkitError, match="Kafka 9.9.9 is not a release labkit runs"):
        runtime.ensure_jars(env, version="9.9.9", progress=False)


def test_cached_jars_are_reused_without_maven(tmp_path):
    env = {"PATH": str(tmp_path), "LABKIT_HOME": str(runtime.labkit_home())}  # no mvn on PATH
    assert runtime.ensure_jars(env, progress=False) == runtime.ensure_jars(progress=False)
