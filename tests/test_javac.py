"""labkit.broker.javac: the lab's Java sources compiled once per source and release, with a clear error when
``javac`` is missing or fails."""

import os

import pytest

from labkit.broker import javac, runtime
from labkit.broker.settings import kafka_version
from labkit.core.errors import JavaError
from labkit.crashlab import java

MESSAGE = dict(needed_for="The test source", otherwise="or skip it")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A LABKIT_HOME of the test's own, holding the real jar cache of the release (a link)."""
    jars = runtime.ensure_jars(progress=False)[0].parent
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / jars.name).symlink_to(jars)
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_java_without_javac_is_named_with_the_fix(tmp_path):
    (tmp_path / "java").symlink_to(os.path.realpath(runtime.find_java()))
    with pytest.raises(javac.NoJavacError, match="no javac .*openjdk-17-jdk-headless.*client='librdkafka'"):
        javac.find_javac({"PATH": str(tmp_path)}, **java.WITHOUT_JAVAC)


def test_a_source_is_compiled_once_into_a_jar_and_a_change_compiles_again(home, tmp_path):
    source = tmp_path / "src" / "labkit" / "t"
    source.mkdir(parents=True)
    (source / "T.java").write_text("package labkit.t; class T { org.apache.kafka.common.Uuid u = "
                                   "org.apache.kafka.common.Uuid.randomUuid(); }")  # against the release's jars
    folder = javac.compiled("t", tmp_path, kafka_version(), "t.jar", **MESSAGE)
    assert folder.parent == home and (folder / "t.jar").exists() and (folder / ".complete").exists()
    assert not (folder / "log4j2.properties").exists()  # the source has none
    made = (folder / ".complete").stat().st_mtime_ns
    assert javac.compiled("t", tmp_path, kafka_version(), "t.jar", **MESSAGE) == folder
    assert (folder / ".complete").stat().st_mtime_ns == made
    (source / "T.java").write_text((source / "T.java").read_text() + "\n// changed\n")
    again = javac.compiled("t", tmp_path, kafka_version(), "t.jar", **MESSAGE)
    assert again != folder and (again / "t.jar").exists()


def test_a_source_that_does_not_compile_names_the_error_and_leaves_nothing(home, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Bad.java").write_text("class Bad { int x = ; }")
    with pytest.raises(JavaError, match=r"javac could not compile (.|\n)*Bad\.java(.|\n)*illegal start of expression"):
        javac.compiled("bad", tmp_path, kafka_version(), "bad.jar", **MESSAGE)
    assert [p.name for p in home.iterdir()] == [runtime.ensure_jars(progress=False)[0].parent.name]
