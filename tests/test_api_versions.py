"""What the broker supports, as it answers ApiVersions (labkit/kafka/api_versions.py): the real broker's answer, and
the table of Kafka's API names checked against the kafka-clients jar of each release labkit runs."""

import re
import socket
import time
import zipfile

import pytest

from labkit.broker import runtime
from labkit.broker.settings import FEATURES_BY_VERSION, kafka_at_least, kafka_version
from labkit.core.errors import BrokerUnreachableError
from labkit.kafka.api_versions import API_NAMES, api_name, broker_api_versions, broker_features


def jar_api_names(version: str) -> dict[int, str]:
    """API key -> request name, from ``common/message/*Request.json`` in Kafka ``version``'s kafka-clients jar."""
    jar = runtime.jar_dir(version=version) / f"kafka-clients-{version}.jar"
    if not jar.exists():
        pytest.skip(f"Kafka {version}'s jars are not cached")
    names = {}
    with zipfile.ZipFile(jar) as z:
        for entry in z.namelist():
            if entry.startswith("common/message/") and entry.endswith("Request.json"):
                text = z.read(entry).decode()
                if re.search(r'"type":\s*"request"', text):
                    key = int(re.search(r'"apiKey":\s*(\d+)', text).group(1))
                    names[key] = re.search(r'"name":\s*"(\w+)Request"', text).group(1)
    return names


@pytest.mark.parametrize("version", list(FEATURES_BY_VERSION))
def test_the_names_are_the_releases_own(version):
    """Every key of the release is in the table under the release's name (the table may know later keys)."""
    names = jar_api_names(version)
    assert names and {key: API_NAMES.get(key) for key in names} == names


def test_the_broker_answers_its_api_keys_and_versions(bootstrap):
    apis = broker_api_versions(bootstrap)
    assert list(apis) == sorted(apis) and all(low <= high for low, high in apis.values())
    assert 18 in apis and apis[18][1] >= 3  # ApiVersions itself, v3 (the version asked)
    assert all(key in API_NAMES for key in apis), [key for key in apis if key not in API_NAMES]
    assert 52 not in apis  # Vote: a controller's request, not the broker listener's
    # The drafts' numbers (notebooks 05 and 07): TxnOffsetCommit v6 and API key 93 came with Kafka 4.4.0.
    assert (apis[28][1] >= 6) == (93 in apis) == kafka_at_least("4.4"), (apis[28], apis.get(93))
    assert api_name(28) == "TxnOffsetCommit" and api_name(999) == "unnamed key 999"


def test_the_broker_reports_its_features_as_formatted(bootstrap):
    """The same answer's features: the share.version the storage was formatted with (FEATURES_BY_VERSION) finalized,
    and metadata.version finalized within what the broker supports."""
    features = broker_features(bootstrap)
    share = int(FEATURES_BY_VERSION[kafka_version()]["share.version"])
    assert features["share.version"]["finalized"] == share, features["share.version"]
    meta = features["metadata.version"]
    assert meta["min"] <= meta["finalized"] <= meta["max"], meta


def test_no_broker_is_named_within_the_deadline():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match=f"127.0.0.1:{port}"):
        broker_api_versions(f"127.0.0.1:{port}", timeout_s=1.0)
    assert time.monotonic() - started < 10
