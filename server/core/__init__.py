"""The core NATS server: listeners, client connections, the subject index and message fan-out."""
