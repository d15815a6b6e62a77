"""Prometheus metrics (prometheus-client) for /metrics, read from the server's counters when scraped."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class _ServerCollector:
    def __init__(self, server) -> None:
        self.server = server

    def collect(self):
        s = self.server
        yield GaugeMetricFamily("skiff_connections", "Open client connections", value=len(s.clients))
        yield CounterMetricFamily("skiff_total_connections", "Connections accepted", value=s.total_connections)
        yield GaugeMetricFamily("skiff_subscriptions", "Subscriptions in the subject index", value=s.sublist.count)
        st = s.stats()
        yield CounterMetricFamily("skiff_in_msgs", "Messages received", value=st["in_msgs"])
        yield CounterMetricFamily("skiff_out_msgs", "Messages delivered", value=st["out_msgs"])
        yield CounterMetricFamily("skiff_in_bytes", "Payload bytes received", value=st["in_bytes"])
        yield CounterMetricFamily("skiff_out_bytes", "Payload bytes delivered", value=st["out_bytes"])
        yield CounterMetricFamily("skiff_slow_consumers", "Connections closed as slow consumers", value=s.slow_consumers)
        js = s.jetstream
        if js is not None:
            st = js.totals()
            yield GaugeMetricFamily("skiff_jetstream_streams", "Streams", value=st["streams"])
            yield GaugeMetricFamily("skiff_jetstream_consumers", "Consumers", value=st["consumers"])
            yield GaugeMetricFamily("skiff_jetstream_messages", "Messages stored", value=st["messages"])
            yield GaugeMetricFamily("skiff_jetstream_bytes", "Bytes stored", value=st["bytes"])


_registries: dict[int, CollectorRegistry] = {}


def registry_for(server) -> CollectorRegistry:
    reg = _registries.get(id(server))
    if reg is None:
        reg = CollectorRegistry()
        reg.register(_ServerCollector(server))
        _registries[id(server)] = reg
    return reg


def render(server) -> bytes:
    return generate_latest(registry_for(server))
