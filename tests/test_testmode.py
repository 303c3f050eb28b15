"""``labkit.under_test()``: a notebook's CI-only cells (pressing a playground's buttons) act only under the test
runner, which says so with ``LABKIT_CI=1`` (conftest.py, ``make test``); every kernel nbval starts inherits it."""

import pytest

import labkit
from labkit import testmode


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", " 1 "])
def test_under_test_when_the_test_run_sets_labkit_ci(monkeypatch, value):
    monkeypatch.setenv("LABKIT_CI", value)
    assert labkit.under_test() is True


@pytest.mark.parametrize("value", [None, "", "0", "false", "no", "off"])
def test_not_under_test_in_a_learners_lab(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("LABKIT_CI", raising=False)
    else:
        monkeypatch.setenv("LABKIT_CI", value)
    assert labkit.under_test() is False


def test_it_is_public_and_read_at_each_call(monkeypatch):
    assert "under_test" in labkit.__all__ and labkit.under_test is testmode.under_test and testmode.ENV == "LABKIT_CI"
    monkeypatch.setenv("LABKIT_CI", "1")
    assert labkit.under_test()
    monkeypatch.delenv("LABKIT_CI")
    assert not labkit.under_test()


def test_the_test_run_sets_it_and_an_nbval_kernel_inherits_it():
    """conftest.py's ``pytest_configure`` set it in this process; a kernel started the way nbval starts one sees it."""
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, start_new_kernel

    assert labkit.under_test()
    seen = []
    km, kc = start_new_kernel(kernel_name=CURRENT_ENV_KERNEL_NAME)
    try:
        reply = kc.execute_interactive("import labkit, os; print(os.environ.get('LABKIT_CI'), labkit.under_test())",
                                       timeout=60, output_hook=seen.append)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    text = "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
    assert text.split() == ["1", "True"], text
