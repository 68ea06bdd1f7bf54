"""Whole-request error answers of the batched versions (error_response_body): AddPartitionsToTxn
v4+ carries the error at the top and per transaction (named), FindCoordinator v4 one entry per
key (named), as Kafka's getErrorResponse does; the encodings round-trip."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.protocol.apis import APIS, error_response_body
from log.protocol.coordinator import FIND_COORDINATOR_REQUEST
from log.protocol.transactions import ADD_PARTITIONS_TO_TXN_REQUEST

A = ADD_PARTITIONS_TO_TXN_REQUEST.cls
F = FIND_COORDINATOR_REQUEST.cls


def test_add_partitions_to_txn_v4_whole_request_error():
    request = A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id="t", producer_id=1, producer_epoch=0, verify_only=True,
        topics=[A.AddPartitionsToTxnTopic(name="x", partitions=[0, 1])])])  # fmt: skip
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    for version in (4, 5):
        body = error_response_body(APIS[24], version, request, code)
        assert body.error_code == code
        [result] = body.results_by_transaction
        assert result.transactional_id == "t"
        assert {(t.name, p.partition_index, p.partition_error_code) for t in result.topic_results
                for p in t.results_by_partition} == {("x", 0, code), ("x", 1, code)}  # fmt: skip
        response = APIS[24].response
        assert response.decode(response.encode(body, version), version)[0] == body


def test_find_coordinator_v4_whole_request_error():
    code = ErrorCode.UNSUPPORTED_VERSION
    body = error_response_body(APIS[10], 4, F(key_type=1, coordinator_keys=["a", "b"]), code)
    assert [(c.key, c.error_code) for c in body.coordinators] == [("a", code), ("b", code)]
    response = APIS[10].response
    assert response.decode(response.encode(body, 4), 4)[0] == body
