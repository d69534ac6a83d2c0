package io.aeronspark.interop;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;

/**
 * Command-line interop peer built against the real Aeron 1.15.1 jar (media driver, archive and
 * archive client). Results are JSON lines on stdout, logs on stderr.
 *
 * <pre>
 * archive  --archive-dir D --aeron-dir A [--control-channel C] [--control-stream-id N] ...
 * driver   --aeron-dir A
 * record   (--aeron-dir A | --embedded-driver) [archive client options] --channel CH --stream-id N
 *          --messages K --size B [--fragmented]
 * start-recording [client options] --channel CH --stream-id N [--source-location local|remote]
 * stop-recording  [client options] --channel CH --stream-id N [--recording-id ID [--await-position P]]
 * list     (--aeron-dir A | --embedded-driver) [archive client options] [--recording-id ID]
 * replay   (--aeron-dir A | --embedded-driver) [archive client options] --recording-id ID [--position P]
 *          [--length L] --replay-channel CH --replay-stream-id N
 * publish  (--aeron-dir A | --embedded-driver) --channel CH --stream-id N --messages K --size B
 * golden   [--aeron-dir A | --embedded-driver]
 * scripted-session (--aeron-dir A | --embedded-driver) [archive client options] --channel C --channel-b C2
 *          --stream-id N --messages K --size B --replay-channel R --replay-stream-id N --session-id S
 *          [--with-unanswered]
 * </pre>
 *
 * Exit codes: 0 done, 1 failed (error line on stdout, stack trace on stderr), 2 bad usage, 3 timed out.
 */
public final class InteropPeer
{
    static final int EXIT_OK = 0;
    static final int EXIT_FAILED = 1;
    static final int EXIT_USAGE = 2;
    static final int EXIT_TIMEOUT = 3;

    private static final Set<String> SERVER_FLAGS = set("no-stdin-watch", "spies-simulate-connection");
    private static final Set<String> DRIVER_SELECTION = set("aeron-dir");
    private static final Set<String> CLIENT_CONNECTION = set(
        "aeron-dir", "control-channel", "control-stream-id", "response-channel", "response-stream-id",
        "message-timeout-ms", "timeout-ms");
    private static final Set<String> CLIENT_FLAGS = set("embedded-driver");

    private InteropPeer()
    {
    }

    public static void main(final String[] args)
    {
        System.exit(run(args));
    }

    static int run(final String[] args)
    {
        if (args.length == 0)
        {
            return usage("missing subcommand");
        }
        final String command = args[0];
        try
        {
            switch (command)
            {
                case "archive":
                    return ServerCommands.archive(Options.parse(command, args, 1, union(DRIVER_SELECTION, set(
                        "archive-dir", "control-channel", "control-stream-id", "local-control-channel",
                        "local-control-stream-id", "recording-events-channel", "recording-events-stream-id",
                        "segment-length", "threading")), union(SERVER_FLAGS, set("delete-archive-on-start"))));
                case "driver":
                    return ServerCommands.driver(Options.parse(
                        command, args, 1, union(DRIVER_SELECTION, set("threading")), SERVER_FLAGS));
                case "record":
                    return ClientCommands.record(Options.parse(command, args, 1, union(CLIENT_CONNECTION, set(
                        "channel", "stream-id", "messages", "size", "first-index", "source-location")),
                        union(CLIENT_FLAGS, set("fragmented"))));
                case "start-recording":
                    return ClientCommands.startRecording(Options.parse(command, args, 1, union(CLIENT_CONNECTION, set(
                        "channel", "stream-id", "source-location")), CLIENT_FLAGS));
                case "stop-recording":
                    return ClientCommands.stopRecording(Options.parse(command, args, 1, union(CLIENT_CONNECTION, set(
                        "channel", "stream-id", "recording-id", "await-position")), CLIENT_FLAGS));
                case "list":
                    return ClientCommands.list(Options.parse(command, args, 1, union(CLIENT_CONNECTION, set(
                        "recording-id", "from-recording-id", "count")), CLIENT_FLAGS));
                case "replay":
                    return ClientCommands.replay(Options.parse(command, args, 1, union(CLIENT_CONNECTION, set(
                        "recording-id", "position", "length", "replay-channel", "replay-stream-id")), CLIENT_FLAGS));
                case "publish":
                    return ClientCommands.publish(Options.parse(command, args, 1, union(set(
                        "aeron-dir", "timeout-ms", "channel", "stream-id", "messages", "size", "first-index",
                        "linger-ms")), union(CLIENT_FLAGS, set("fragmented"))));
                case "scripted-session":
                    return ScriptedSession.run(Options.parse(command, args, 1, union(CLIENT_CONNECTION, set(
                        "channel", "channel-b", "stream-id", "messages", "size", "replay-channel", "replay-stream-id",
                        "session-id")), union(CLIENT_FLAGS, set("with-unanswered"))));
                case "golden":
                    return GoldenCommand.run(Options.parse(
                        command, args, 1, set("aeron-dir", "timeout-ms"), CLIENT_FLAGS));
                case "help":
                case "--help":
                    return usage(null);
                default:
                    return usage("unknown subcommand '" + command + "'");
            }
        }
        catch (final UsageException ex)
        {
            return fail(command, "usage", ex, EXIT_USAGE);
        }
        catch (final PeerTimeoutException ex)
        {
            return fail(command, "timeout", ex, EXIT_TIMEOUT);
        }
        catch (final Throwable ex)
        {
            ex.printStackTrace(System.err);
            return fail(command, "failed", ex, EXIT_FAILED);
        }
    }

    private static int fail(final String command, final String kind, final Throwable ex, final int exitCode)
    {
        Json.event("error")
            .put("command", command)
            .put("kind", kind)
            .put("exception", ex.getClass().getName())
            .put("message", String.valueOf(ex.getMessage()))
            .emit();
        System.err.println("[interop-peer] " + command + ": " + ex);
        return exitCode;
    }

    private static int usage(final String problem)
    {
        if (problem != null)
        {
            System.err.println("interop-peer: " + problem);
        }
        System.err.println("usage: interop-peer SUBCOMMAND [--option value]...");
        System.err.println("subcommands: archive driver record start-recording stop-recording list replay publish golden scripted-session" +
            " (see docs/interop.md)");
        return problem == null ? EXIT_OK : EXIT_USAGE;
    }

    private static Set<String> set(final String... names)
    {
        return new HashSet<>(Arrays.asList(names));
    }

    @SafeVarargs
    private static Set<String> union(final Set<String>... sets)
    {
        final Set<String> all = new HashSet<>();
        for (final Set<String> s : sets)
        {
            all.addAll(s);
        }
        return all;
    }
}
