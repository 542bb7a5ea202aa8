"""Controller mode's broker identity: ``brokerIdentity`` (and, while a registration is under
way, ``brokerIdentity-temp``) in the store root.

Mirrors, at rocketmq-all-5.3.3, ``store/.../ha/autoswitch/BrokerMetadata.java``,
``TempBrokerMetadata.java`` and ``MetadataFile.java``, written by ``broker/.../controller/
ReplicasManager.java`` (``MessageStoreConfig.getStorePathBrokerIdentity``:
``<storePathRootDir>/brokerIdentity`` unless ``storePathBrokerIdentity`` is set; the temp file
is that path + ``-temp``). One line of UTF-8 text, no line separator, fields joined by ``#``::

    brokerIdentity:       <clusterName>#<brokerName>#<brokerId>
    brokerIdentity-temp:  <clusterName>#<brokerName>#<brokerId>#<registerCheckCode>

brokerId is the id the controller assigned (``Long.valueOf``); registerCheckCode is
``<brokerAddress>;<currentTimeMillis>``. ``writeToFile`` deletes the file before
``MixAll.string2File``, so no ``.bak`` is left beside it.

Reading (``decodeFromStr``): ``split("#")``, then the fields by index. A missing field
(ArrayIndexOutOfBounds) or a brokerId ``Long.valueOf`` refuses throws; ``ReplicasManager``
logs it, and a file that does not load (``isLoaded``: cluster and broker name not empty and a
brokerId) counts as absent: the broker goes on to the temp file, and without one asks the
controller for a new broker id. A loaded identity whose cluster or broker name differs from
the broker's config fails the registration (``checkMetadataValid``).
"""
from __future__ import annotations

import dataclasses

from .epoch_file import java_split
from .qmq.java import NumberFormatError, java_parse

BROKER_IDENTITY_FILE = "brokerIdentity"
TEMP_SUFFIX = "-temp"  # ReplicasManager: getStorePathBrokerIdentity() + "-temp"
FIELD_SEPARATOR = "#"


@dataclasses.dataclass(frozen=True)
class BrokerIdentity:
    """What ``decodeFromStr`` set before it stopped, and whether the broker counts it as loaded."""
    cluster_name: str | None
    broker_name: str | None
    broker_id: int | None
    register_check_code: str | None = None  # the temp file's
    why: str | None = None  # why it does not load (None: it does)

    @property
    def loaded(self) -> bool:
        return self.why is None


def parse_broker_identity(data: bytes, *, temp: bool = False) -> BrokerIdentity:
    """``BrokerMetadata.decodeFromStr`` (``TempBrokerMetadata``'s with ``temp``) and ``isLoaded``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")  # new String(bytes, UTF-8) replaces, it does not throw
    parts = java_split(text, FIELD_SEPARATOR)
    want = 4 if temp else 3
    fields = parts + [None] * (want - len(parts))
    cluster, broker = fields[0], fields[1]
    if len(parts) < 3:
        return BrokerIdentity(cluster, broker, None, why=f"{len(parts)} field(s) split at '#', {want} expected: "
                                                         f"decodeFromStr throws")
    try:
        broker_id = java_parse(parts[2], "long")
    except NumberFormatError:
        return BrokerIdentity(cluster, broker, None, why=f"brokerId {parts[2]!r} is not a number Long.valueOf reads")
    check = fields[3] if temp else None
    if temp and len(parts) < 4:
        return BrokerIdentity(cluster, broker, broker_id, why="no registerCheckCode field: decodeFromStr throws")
    if not cluster or not broker or (temp and not check):
        return BrokerIdentity(cluster, broker, broker_id, check, why="an empty field: isLoaded is false")
    return BrokerIdentity(cluster, broker, broker_id, check)


def broker_identity_text(cluster_name: str, broker_name: str, broker_id: int,
                         register_check_code: str | None = None) -> str:
    """``encodeToStr`` of BrokerMetadata (TempBrokerMetadata's with a registerCheckCode)."""
    fields = [cluster_name, broker_name, str(broker_id)]
    if register_check_code is not None:
        fields.append(register_check_code)
    return FIELD_SEPARATOR.join(fields)
