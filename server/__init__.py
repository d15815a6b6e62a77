"""skiff.server: the NATS server (core protocol, accounts, JetStream, monitoring) and its command line."""
