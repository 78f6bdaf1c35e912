"""The proposal ConfigMap's layout (``plan.proposal_configmap``): plain while it fits, every
text file gzip-compressed when it does not, refused with its size when nothing fits; read back
the same in either layout (the handler's children and ``jbod-ctl rebalance show`` read it)."""

from __future__ import annotations

import base64
import json
import random

import pytest

from jbod_operator.plan.proposal_configmap import (
    CONFIGMAP_LIMIT,
    GZ,
    PLOT,
    TEXT_FILES,
    ProposalTooLarge,
    pack,
    read_text,
)


def reassignment(partitions: int) -> bytes:
    """kafka-reassign-partitions JSON of ``partitions`` moves (compresses like a real one)."""
    doc = {
        "version": 1,
        "partitions": [
            {
                "topic": f"topic-{p % 97}",
                "partition": p,
                "replicas": [p % 250, (p + 1) % 250, (p + 2) % 250],
                "log_dirs": [f"/var/lib/jbod/data-d{(p + i) % 12:02d}" for i in range(3)],
            }
            for p in range(partitions)
        ],
    }
    return json.dumps(doc).encode()


def as_configmap(data: dict[str, str], binary: dict[str, str]) -> dict[str, object]:
    return {"data": data, "binaryData": binary}


def test_a_proposal_that_fits_is_stored_as_it_is() -> None:
    files = {"report.json": b'{"a": 1}', "waves.json": b'{"waves": 1}', PLOT: b"\x89PNG"}
    data, binary = pack(files)
    assert data == {"report.json": '{"a": 1}', "waves.json": '{"waves": 1}'}
    assert binary == {PLOT: base64.b64encode(b"\x89PNG").decode()}
    cm = as_configmap(data, binary)
    assert read_text(cm, "report.json") == '{"a": 1}'
    assert read_text(cm, "manifests.json") is None


def test_a_proposal_over_the_limit_is_compressed_whole_and_reads_back_the_same() -> None:
    big = reassignment(20_000)
    assert len(big) > CONFIGMAP_LIMIT  # the real failure: one file alone passes 1 MiB
    files = {"reassignment.json": big, "report.txt": b"summary", PLOT: b"\x89PNG"}
    data, binary = pack(files)
    assert data == {}
    assert set(binary) == {"reassignment.json" + GZ, "report.txt" + GZ, PLOT}
    stored = sum(len(k) + len(base64.b64decode(v)) for k, v in binary.items())
    assert stored <= CONFIGMAP_LIMIT
    cm = as_configmap(data, binary)
    assert read_text(cm, "reassignment.json") == big.decode()
    assert read_text(cm, "report.txt") == "summary"


def test_a_proposal_too_large_even_compressed_is_refused_with_its_size() -> None:
    noise = random.Random(7).randbytes(CONFIGMAP_LIMIT)  # incompressible
    with pytest.raises(ProposalTooLarge, match=r"even gzip-compressed .* more than a ConfigMap"):
        pack({"manifests.json": base64.b64encode(noise)})


def test_a_damaged_compressed_file_is_a_value_error_not_a_crash() -> None:
    with pytest.raises(ValueError, match=r"manifests\.json\.gz does not decode"):
        read_text({"binaryData": {"manifests.json.gz": "bm90IGd6aXA="}}, "manifests.json")
    with pytest.raises(ValueError, match="does not decode"):
        read_text({"binaryData": {"waves.json.gz": "%%%"}}, "waves.json")


def test_every_file_a_planning_job_writes_has_a_place_in_the_layout() -> None:
    """pack keeps only the files it knows: a new output of the job must be added here too."""
    from jbod_operator.clients.planning_jobs import OUTPUT_FILES

    assert set(OUTPUT_FILES) <= {*TEXT_FILES, PLOT}
