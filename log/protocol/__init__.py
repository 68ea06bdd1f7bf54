"""The Kafka wire protocol, sans-IO.

    errors.py        Kafka error codes and typed exceptions (KafkaError.error_code)
    schema.py        the message DSL (F, ARRAY, STRUCT, message) and the generated fast codecs
    wire_construct.py  construct definitions derived from the same declarations (reference)
    framing.py       size-prefixed frames (FrameDecoder), request/response headers
    apis.py          the API table (APIS), families, ApiVersions bodies, refusal bodies
    connection.py    ServerConnection: bytes -> Request events -> ordered response bytes
    client_codec.py  ClientCodec: requests -> bytes, bytes -> ClientResponse
    api_versions.py, metadata.py, produce.py, fetch.py, offsets.py, producer_id.py,
    coordinator.py, admin.py, groups.py, transactions.py, controller.py
                     one module per API family: <NAME>_REQUEST / <NAME>_RESPONSE messages

A message's body class is `<MESSAGE>.cls`; its nested struct classes hang off it by Kafka's
struct name, e.g. `PRODUCE_RESPONSE.cls.PartitionProduceResponse`. Records are never decoded
here: they arrive as a writable memoryview into the request frame and leave as given.
"""
