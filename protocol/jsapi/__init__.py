"""JetStream API wire layer: subjects, Go-compatible JSON, stream/consumer configs, requests (no I/O).

Modules: ``subjects`` (the table of $JS.API subjects the server routes by, and the other $JS subjects), ``timefmt`` (Go time/duration text), ``gojson`` (decode
and encode exactly like nats-server's encoding/json use), ``stream_config`` (StreamConfig + checkStreamCfg),
``consumer_config`` (ConsumerConfig + setConsumerConfigDefaults/checkConsumerCfg), ``requests`` (request bodies).
"""
