"""What a page that does not get where it should was waiting for (``labkit_dev.browser.network_report``) and what the hub's
log says of that attendee (``labkit_dev.drive.log_of``), quoted by ``drive.wait_for_lab``'s error: pages in headless
Chromium against a local server with a request that never answers and one refused."""

import http.server
import socket
import threading

import pytest

from labkit.core.errors import LabkitError
from labkit_dev import browser
from labkit_dev import drive

pytestmark = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "")


@pytest.fixture(scope="module")
def server():
    """A local server: ``/`` a page loading ``/never`` (answered only once the module ends) and an image from a port
    where nothing listens; ``/plain`` a page with neither."""
    release = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/never":
                release.wait(120)
            with socket.socket() as closed:  # a free port nobody listens on
                closed.bind(("127.0.0.1", 0))
                refused = closed.getsockname()[1]
            body = {"/": f"<img src='/never'><img src='http://127.0.0.1:{refused}/gone.png'>",
                    "/plain": "<p>nothing to load</p>"}.get(self.path, "")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    release.set()
    httpd.shutdown()


def test_the_network_report_names_the_request_still_pending_and_the_one_that_failed(server):
    with browser.chromium() as page:
        page.goto(f"{server}/", wait_until="domcontentloaded")
        page.wait_for_timeout(500)
        report = browser.network_report(page)
        assert f"pending: {server}/never" in report, report
        assert "failed: http://127.0.0.1:" in report and "/gone.png (net::ERR_CONNECTION_REFUSED)" in report, report
        page.goto(f"{server}/plain")
        other = browser.new_page(page.context.browser)  # a page of its own keeps its own record
        other.goto(f"{server}/plain")
        assert browser.network_report(other) == "no request pending or failed"


def test_wait_for_lab_s_error_quotes_the_page_its_network_and_only_that_attendee_s_log_lines(server, tmp_path):
    log = tmp_path / "hub.log"
    log.write_text("[I] 302 GET /user/bea/lab\n[I] 200 GET /user/al/api/kernels\n[W] lab-bea: slow start\n")
    hub = {"url": f"{server}/", "log": log}
    with browser.chromium() as page:
        page.goto(f"{server}/", wait_until="domcontentloaded")
        with pytest.raises(LabkitError) as raised:
            drive.wait_for_lab(page, hub, "bea", timeout_s=1)
    message = str(raised.value)
    assert "bea's JupyterLab did not show 00_tour.ipynb within 1 s" in message
    assert f"pending: {server}/never" in message and "net::ERR_CONNECTION_REFUSED" in message
    assert "302 GET /user/bea/lab" in message and "lab-bea: slow start" in message
    assert "/user/al/" not in message


def test_wait_for_server_names_a_server_that_answers_its_contents_with_a_page_not_a_listing(server, tmp_path):
    """A server whose contents API answers 200 with HTML (a sign-in page, say) is a lab not ready, said as such."""
    hub = {"url": f"{server}/", "log": tmp_path / "hub.log"}
    with browser.chromium() as page:
        page.goto(f"{server}/user/bea/lab", wait_until="domcontentloaded")
        with pytest.raises(LabkitError) as raised:
            drive.wait_for_server(page, hub, "bea", timeout_s=5)
    assert "bea's JupyterLab server answered 200 without 00_tour.ipynb" in str(raised.value), raised.value
