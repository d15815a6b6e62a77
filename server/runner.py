"""``skiff`` as a process: logging, uvloop, the pid and ports files and nats-server's signals.

SIGTERM / SIGINT stop cleanly (stores flushed), SIGUSR2 enters lame-duck mode, SIGHUP reloads the configuration
file (log levels and authorization; other changes need a restart, as several do in nats-server), SIGUSR1 reopens
the log file (``--signal reopen``, for logrotate).  The process that runs this is the server itself: there is no
wrapper child, so a harness's SIGKILL stops it.

Start-up follows nats-server's order and words (server/startup.py): the banner, then every listener; a failure is
one ``[FTL]`` line saying what failed and where, and exit status 1.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys

from . import log as logmod
from . import startup
from .core import gcpolicy, malloc
from .options import ServerOptions


def _configure_logging(options: ServerOptions, **override) -> None:
    kw = dict(
        debug=options.debug,
        trace=options.trace,
        logtime=options.logtime,
        log_file=options.log_file,
        json_logs=getattr(options, "log_json", False),
        logtime_utc=getattr(options, "logtime_utc", False),
        log_size_limit=getattr(options, "log_size_limit", 0),
        max_traced_msg_len=getattr(options, "max_traced_msg_len", 0),
    )
    kw.update(override)
    logmod.configure(**kw)


def run(options: ServerOptions) -> int:
    try:
        _configure_logging(options)
    except OSError as e:
        # nats-server logger.NewFileLogger: log.Fatalf("error opening file: %v", err)
        print(f"error opening file: open {options.log_file}: {startup.go_strerror(e)}", file=sys.stderr)
        return 1
    try:
        import uvloop  # noqa: F401

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a runtime dependency on every supported platform
        runner = asyncio.run
    try:
        return runner(_main(options))
    except KeyboardInterrupt:  # pragma: no cover
        return 0


def _preflight(options: ServerOptions) -> str | None:
    """What nats-server would refuse before the listeners are up, as its [FTL] line."""
    # nats-server Start: monitoring, then JetStream, then the client listener.
    if options.http_port:
        err = startup.check_listen_port(options.http_port)
        if err:
            return startup.monitor_listen_fatal(err)
    if options.jetstream:
        err = startup.check_store_dir(os.path.abspath(options.store_dir))  # set by _main when not configured
        if err:
            return f"Can't start JetStream: {err}"
    err = startup.check_listen_port(options.port)
    if err:
        return startup.client_listen_fatal(options.host, options.port, err)
    return None


async def _main(options: ServerOptions) -> int:
    from .core.server import Server

    from .core.accounts import AccountError
    from .core.spin import spinner_for_process

    log = logmod.get_logger("skiff")
    # -js without a store directory: nats-server's temporary directory, with its warning (logged below).
    temp_store = options.jetstream and not options.store_dir
    if temp_store:
        options = options.model_copy(update={"store_dir": startup.temp_store_base(options)})
    clock = None
    if options.clock == "manual":  # --clock=manual: moved only by $SKIFF.CLOCK requests (skiff/testing/control.py)
        from .clock import ManualClock

        clock = ManualClock()
    try:
        server = Server(options, clock=clock)
    except AccountError as e:  # an accounts configuration nats-server refuses too
        logmod.fatal(f"Error configuring accounts: {e}")
        return 1
    try:
        # A process of its own polls a moment for the next request after a reply (core/spin.py); a server in a
        # test's own event loop never does.
        server.spinner = spinner_for_process()
    except ValueError as e:
        logmod.fatal(f"Error starting server: {e}")
        return 1
    for level, line in startup.banner_lines(server):
        getattr(log, level)(line)
    fatal = _preflight(options)
    control = None
    if fatal is None and options.control:  # --control: skiff/testing/control.py, refused before anything listens
        from skiff.testing.control import Control

        control = Control(server, token=options.control_token)
        refusal = control.refusal()
        if refusal:
            fatal = f"Error starting server: {refusal}"
    if fatal is None:
        try:
            await server.start()
        except OSError as e:
            if server.monitor is not None and not server.http_port:  # the monitor is started before the clients
                fatal = startup.monitor_listen_fatal(
                    startup.listen_error(options.http_host or options.host, options.http_port, e))
            elif server.jetstream is not None and e.filename:  # a file operation, not a bind
                fatal = f"Can't start JetStream: {startup.go_strerror(e)} ({e.filename})"
            else:
                fatal = startup.client_listen_fatal(options.host, options.port,
                                                    startup.listen_error(options.host, options.port, e))
        except Exception as e:  # configuration problems found at start (TLS files)
            fatal = f"Error starting server: {e}"
        if fatal is None and control is not None:
            server.control = control.start()
    if fatal is not None:
        logmod.fatal(fatal)
        try:
            await server.shutdown()
        except Exception as e:  # noqa: BLE001 - the start already failed; say so, exit 1 all the same
            logmod.get_logger("skiff").error("shutdown after a failed start failed", error=repr(e))
        return 1
    # Everything allocated at start-up (modules, config models, recovered indexes) lives for the whole run: it is
    # frozen out of the collector's reach, and so are bulk creations later (server/core/gcpolicy.py).  Anything left
    # in a reference cycle waits long for a collection, so per-connection and per-consumer objects must be freed by
    # reference counting: tests/server/test_memory.py and tests/jetstream/test_consumer_memory.py check it with the
    # collector off, and bench/churn_rss.py measured RSS flat (38.9 MiB, +0.0%) over 60,000 connection cycles.
    gcpolicy.POLICY.install()
    malloc.tune()  # a socket read's block comes from the heap, never from mmap (server/core/malloc.py)
    # Signals first: a harness may send SIGTERM as soon as it reads a port or "Server is ready".
    loop = asyncio.get_running_loop()

    def stop(signame: str) -> None:
        log.info(f'Trapped "{signame}" signal')
        asyncio.ensure_future(server.shutdown())

    loop.add_signal_handler(signal.SIGTERM, stop, "terminated")
    loop.add_signal_handler(signal.SIGINT, stop, "interrupt")
    loop.add_signal_handler(signal.SIGUSR2, lambda: asyncio.ensure_future(server.lame_duck_mode()))
    loop.add_signal_handler(signal.SIGHUP, lambda: _reload(server, log))
    loop.add_signal_handler(signal.SIGUSR1, _reopen_log, log)

    # nats-server's start-up order: monitor, JetStream, client listener (logged once everything is up).
    if server.http_port:  # started first: harnesses poll /varz to know the server is ready
        scheme = "https" if options.https_port else "http"
        log.info(f"Starting {scheme} monitor on "
                 f"{startup.join_host_port(options.http_host or options.host, server.http_port)}")
    if server.jetstream is not None:
        lines = startup.jetstream_lines(server.jetstream, options)
        log.info(lines[0])  # "Starting JetStream"
        if temp_store:
            log.warning(startup.TEMP_STORE_WARNING)
        for line in lines[1:]:
            log.info(line)
    log.info(f"Listening for client connections on {startup.join_host_port(options.host, server.port)}")
    ports_file = None
    if options.ports_file_dir:
        ports_file, err = startup.write_ports_file(options.ports_file_dir, server)
        if err:
            log.error(err)
            ports_file = None
    log.info("Server is ready")
    if options.pid_file:
        with open(options.pid_file, "w") as f:
            f.write(str(os.getpid()))
    await server.wait_stopped()
    if ports_file:
        err = startup.remove_ports_file(ports_file)
        if err:
            log.error(err)
    if options.pid_file:
        try:
            os.unlink(options.pid_file)
        except OSError:
            pass
    return 0


def _reopen_log(log) -> None:
    try:
        logmod.reopen()
    except OSError as e:
        log.error(f"Error re-opening the log file: {startup.go_strerror(e)}")


def _reload(server, log) -> None:
    """SIGHUP: re-read the config file and apply what can change at run time."""
    path = server.options.config_file
    if not path:
        log.info("Reloaded: no configuration file")
        return
    try:
        from .options import reload_options

        new = reload_options(server.options)  # the command-line flags win again (nats-server FlagSnapshot)
    except Exception as e:
        log.error(f"Failed to reload server configuration: {e}")
        return
    from .core.auth import Auth

    cur = server.options
    if new.websocket != cur.websocket:
        # nats-server reload.go diffOptions: any change of the websocket block fails the reload.
        log.error("Failed to reload server configuration: config reload not supported for Websocket: "
                  f"old={cur.websocket}, new={new.websocket}")
        return
    cluster = server.cluster
    if cluster is not None or (new.cluster is not None and new.cluster.port):
        # reload.go validateClusterOpts / clusterOption: core/cluster.py says what it cannot change at run time.
        err = cluster.reload_error(new.cluster) if cluster is not None and new.cluster is not None else (
            f"config reload not supported for cluster host: old=, new={new.cluster.host}" if cluster is None else
            f"config reload not supported for cluster host: old={cur.cluster.host}, new=")
        if err:
            log.error(f"Failed to reload server configuration: {err}")
            return
    changes = {k: getattr(new, k) for k in ("debug", "trace", "logtime", "max_payload", "ping_interval", "ping_max")}
    if cluster is not None:
        changes["cluster"] = new.cluster
    server.options = cur.model_copy(update=changes)
    server.auth = Auth(new)
    try:
        # The log file stays the one the process started with; the old handle is closed (log.configure).
        _configure_logging(server.options)
    except OSError as e:
        log.error(f"Failed to reload server configuration: error opening file: {startup.go_strerror(e)}")
        return
    for client in list(server.clients.values()):
        client._update_pub_path()  # trace may have changed
    if cluster is not None:
        cluster.reload(new.cluster)
    log.info("Reloaded server configuration")
