"""The bundle for a venue with no network (labkit/bundle/): its manifest, the install's checks and clear errors, and
the offline pip commands make builds, on small archives written by the real writer (the real one, about 700 MB, is
tested by ``python -m labkit_dev.offline_check``, outside make test)."""

import json
import os
import subprocess
import sys
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest

from labkit.bundle import build, install, manifest
from labkit.bundle.manifest import BundleError

ROOT = Path(__file__).resolve().parents[1]


def small_bundle(tmp_path, *, about=None, caches=("kafka-9.9.9",)):
    """A bundle of one wheel and, per cache folder, a jar and its .complete, made for this Python and checkout."""
    src = tmp_path / f"src-{uuid.uuid4().hex[:8]}"
    (src / "wheels").mkdir(parents=True)
    wheel = src / "wheels" / "demo-1.0-py3-none-any.whl"
    wheel.write_bytes(os.urandom(4096))
    files = {"wheels/demo-1.0-py3-none-any.whl": wheel}
    for cache in caches:
        (src / cache).mkdir()
        (src / cache / "kafka-clients.jar").write_bytes(os.urandom(2048))
        (src / cache / ".complete").write_text("test\n")
        files |= {f"labkit-home/{cache}/{p.name}": p for p in sorted((src / cache).iterdir())}
    about = {**manifest.target(), "requirements_sha256": manifest.sha256_file(ROOT / "requirements.txt"),
             "packages": {"demo": "1.0"}, "created": "now", "labkit": "0.1.0", **(about or {})}
    path = tmp_path / f"bundle-{uuid.uuid4().hex[:8]}.tar"
    return path, manifest.write_archive(path, files, about), files


def places(tmp_path):
    return {"wheels": tmp_path / "checkout" / ".bundle" / "wheels", "home": tmp_path / "labkit-home"}


def test_manifest_comes_first_and_lists_each_file_with_its_size_and_hash(tmp_path):
    path, written, files = small_bundle(tmp_path)
    with tarfile.open(path) as tar:
        names = tar.getnames()
        assert names[0] == manifest.MANIFEST
        read = json.load(tar.extractfile(manifest.MANIFEST))
    assert read == written and names[1:] == list(files)
    assert read["format"] == manifest.FORMAT
    for name, source in files.items():
        assert read["files"][name] == {"size": source.stat().st_size, "sha256": manifest.sha256_file(source)}


def test_install_puts_wheels_and_caches_where_pip_and_the_lab_look(tmp_path):
    path, _, files = small_bundle(tmp_path, caches=("kafka-9.9.9", "participant-9.9.9-abc"))
    done = install.install(path, **places(tmp_path))
    wheels, home = places(tmp_path).values()
    assert [p.name for p in wheels.iterdir()] == ["demo-1.0-py3-none-any.whl"]
    assert (wheels / "demo-1.0-py3-none-any.whl").read_bytes() == files["wheels/demo-1.0-py3-none-any.whl"].read_bytes()
    assert (home / "kafka-9.9.9" / "kafka-clients.jar").read_bytes() == \
        files["labkit-home/kafka-9.9.9/kafka-clients.jar"].read_bytes()
    assert (home / "participant-9.9.9-abc" / ".complete").exists()
    assert done["caches"] == ["kafka-9.9.9", "participant-9.9.9-abc"] and done["kept"] == []
    assert sorted(p.name for p in home.iterdir()) == ["kafka-9.9.9", "participant-9.9.9-abc"]  # no staging left


def test_a_complete_cache_already_there_is_kept_and_a_half_written_one_replaced(tmp_path):
    path, _, _ = small_bundle(tmp_path, caches=("kafka-9.9.9", "spark-kafka-9.9.9"))
    home = places(tmp_path)["home"]
    (home / "kafka-9.9.9").mkdir(parents=True)
    (home / "kafka-9.9.9" / ".complete").write_text("mine\n")
    (home / "spark-kafka-9.9.9").mkdir()
    (home / "spark-kafka-9.9.9" / "half.jar").write_bytes(b"x")  # no .complete: a Maven copy that was cut short
    done = install.install(path, **places(tmp_path))
    assert done["kept"] == ["kafka-9.9.9"] and done["caches"] == ["spark-kafka-9.9.9"]
    assert (home / "kafka-9.9.9" / ".complete").read_text() == "mine\n"
    assert sorted(p.name for p in (home / "spark-kafka-9.9.9").iterdir()) == [".complete", "kafka-clients.jar"]


def assert_nothing_written(tmp_path):
    wheels, home = places(tmp_path).values()
    assert not wheels.exists()
    assert not home.exists() or list(home.iterdir()) == []


def test_a_missing_archive_names_make_bundle(tmp_path):
    with pytest.raises(BundleError, match=r"No bundle at .*nope\.tar.*make lab BUNDLE=.*make bundle"):
        install.install(tmp_path / "nope.tar", **places(tmp_path))
    assert_nothing_written(tmp_path)


def test_a_damaged_file_is_named_and_nothing_is_installed(tmp_path):
    path, _, _ = small_bundle(tmp_path)
    data = bytearray(path.read_bytes())
    with tarfile.open(path) as tar:
        offset = tar.getmember("wheels/demo-1.0-py3-none-any.whl").offset_data
    data[offset + 100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(BundleError, match=r"wheels/demo-1\.0-py3-none-any\.whl .* is damaged.*make bundle"):
        install.install(path, **places(tmp_path))
    assert_nothing_written(tmp_path)


def test_a_cut_short_copy_is_named(tmp_path):
    path, _, _ = small_bundle(tmp_path)
    path.write_bytes(path.read_bytes()[:6000])
    with pytest.raises(BundleError, match=r"not a readable tar archive.*copy the archive onto this machine again"):
        install.install(path, **places(tmp_path))
    assert_nothing_written(tmp_path)


def test_a_file_that_is_not_a_tar_or_not_a_bundle_is_named(tmp_path):
    text = tmp_path / "notes.tar"
    text.write_text("not an archive\n")
    with pytest.raises(BundleError, match="not a readable tar archive"):
        install.install(text, **places(tmp_path))
    other = tmp_path / "other.tar"
    with tarfile.open(other, "w") as tar:
        tar.add(text, arcname="notes.txt")
    with pytest.raises(BundleError, match=r"not a labkit bundle .*dist/labkit-bundle-\*\.tar"):
        install.install(other, **places(tmp_path))
    assert_nothing_written(tmp_path)


def test_a_member_the_manifest_does_not_list_is_refused(tmp_path):
    path, _, _ = small_bundle(tmp_path)
    extra = tmp_path / "extra.whl"
    extra.write_bytes(b"x")
    with tarfile.open(path, "a") as tar:
        tar.add(extra, arcname="wheels/extra.whl")
    with pytest.raises(BundleError, match="holds wheels/extra.whl, which its manifest does not list"):
        install.install(path, **places(tmp_path))
    assert_nothing_written(tmp_path)


def test_a_path_outside_the_bundle_folders_is_refused():
    for name in ["../etc/passwd", "/etc/passwd", "labkit-home/../../x", "other/x"]:
        with pytest.raises(BundleError, match="no labkit bundle holds"):
            manifest.member_path(name)


def test_another_python_names_the_python_to_use(tmp_path):
    path, _, _ = small_bundle(tmp_path, about={"python": "3.99"})
    with pytest.raises(BundleError, match=r"wheels for cpython 3\.99 .*PYTHON=python3\.99.*make bundle"):
        install.install(path, **places(tmp_path))
    assert_nothing_written(tmp_path)


def test_another_requirements_txt_names_the_checkout(tmp_path):
    path, _, _ = small_bundle(tmp_path, about={"requirements_sha256": "0" * 64, "commit": "abc123"})
    with pytest.raises(BundleError, match=r"another requirements\.txt.*make bundle.*commit abc123"):
        install.install(path, **places(tmp_path))
    assert_nothing_written(tmp_path)


def test_the_install_needs_the_standard_library_only(tmp_path):
    """make runs it with the system python3 before the venv exists: -S leaves every site-packages out."""
    path, _, _ = small_bundle(tmp_path)
    env = {**os.environ, "LABKIT_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-S", "-c", "import sys; sys.argv[1:] = ['install', sys.argv[-1]]; "
                          "import runpy; runpy.run_module('labkit.bundle', run_name='__main__')", "missing.tar"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "No bundle at missing.tar" in out.stderr


def make_dry_run(*args):
    return subprocess.run(["make", "-n", "-B", "--no-print-directory", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True).stdout.splitlines()


def test_make_with_a_bundle_unpacks_it_first_and_pip_reads_only_its_wheels():
    lines = make_dry_run("setup", "BUNDLE=/media/usb/b.tar")
    first_venv = next(i for i, line in enumerate(lines) if " -m venv " in line)
    assert lines.index("python3 -m labkit.bundle install /media/usb/b.tar") < first_venv
    pips = [line for line in lines if " -m pip install" in line]
    assert len(pips) == 3
    assert all("--no-index --find-links .bundle/wheels" in line for line in pips)
    assert str(install.WHEELS_DIR.relative_to(ROOT)) == ".bundle/wheels"


def test_make_without_a_bundle_uses_the_package_index():
    lines = make_dry_run("setup")
    assert not any("labkit.bundle" in line or "--no-index" in line for line in lines)
    assert sum(" -m pip install" in line for line in lines) == 3


def test_class_file_version_reads_the_major_version(tmp_path):
    jar = tmp_path / "x.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        z.writestr("a/B.class", bytes.fromhex("cafebabe" "0000" "0041") + b"\0" * 8)  # 65: Java 21
    assert build.class_file_version(jar) == 65 > build.CLASS_FILE_MAX


def test_archive_name_says_python_and_platform():
    who = {"implementation": "cpython", "python": "3.11", "platform": "linux-x86_64"}
    assert manifest.archive_name("0.1.0", who) == "labkit-bundle-0.1.0-cpython3.11-linux-x86_64.tar"
