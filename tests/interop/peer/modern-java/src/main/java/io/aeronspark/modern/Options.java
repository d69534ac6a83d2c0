package io.aeronspark.modern;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The {@code --name value} options and {@code --flag}s of one subcommand. Each subcommand lists
 * what it accepts, so a misspelt option is a usage error rather than silently ignored.
 */
final class Options
{
    private final String command;
    private final Map<String, String> values = new HashMap<>();
    private final Set<String> flags = new TreeSet<>();

    private Options(final String command)
    {
        this.command = command;
    }

    static Options parse(final String command, final String[] args, final Set<String> valued, final Set<String> flagged)
    {
        final Options options = new Options(command);
        for (int i = 1; i < args.length; i++)
        {
            final String arg = args[i];
            if (!arg.startsWith("--"))
            {
                throw new UsageException(command + ": unexpected argument '" + arg + "'");
            }
            final String name = arg.substring(2);
            if (flagged.contains(name))
            {
                options.flags.add(name);
            }
            else if (valued.contains(name))
            {
                if (i + 1 >= args.length)
                {
                    throw new UsageException(command + ": option --" + name + " needs a value");
                }
                options.values.put(name, args[++i]);
            }
            else
            {
                final Set<String> accepted = new TreeSet<>(valued);
                accepted.addAll(flagged);
                throw new UsageException(command + ": unknown option --" + name + "; accepted: --" +
                    String.join(", --", accepted));
            }
        }
        return options;
    }

    String command()
    {
        return command;
    }

    boolean flag(final String name)
    {
        return flags.contains(name);
    }

    boolean has(final String name)
    {
        return values.containsKey(name);
    }

    String string(final String name, final String defaultValue)
    {
        return values.getOrDefault(name, defaultValue);
    }

    String requiredString(final String name)
    {
        final String value = values.get(name);
        if (value == null)
        {
            throw new UsageException(command + ": option --" + name + " is required");
        }
        return value;
    }

    long longValue(final String name, final long defaultValue)
    {
        final String value = values.get(name);
        return value == null ? defaultValue : parseLong(name, value);
    }

    long requiredLong(final String name)
    {
        return parseLong(name, requiredString(name));
    }

    int intValue(final String name, final int defaultValue)
    {
        return toInt(name, longValue(name, defaultValue));
    }

    int requiredInt(final String name)
    {
        return toInt(name, requiredLong(name));
    }

    int nonNegativeInt(final String name)
    {
        final int value = requiredInt(name);
        if (value < 0)
        {
            throw new UsageException(command + ": --" + name + " must be >= 0, got " + value);
        }
        return value;
    }

    private int toInt(final String name, final long value)
    {
        if (value < Integer.MIN_VALUE || value > Integer.MAX_VALUE)
        {
            throw new UsageException(command + ": option --" + name + " is out of the int range: " + value);
        }
        return (int)value;
    }

    private long parseLong(final String name, final String value)
    {
        try
        {
            return Long.parseLong(value);
        }
        catch (final NumberFormatException ex)
        {
            throw new UsageException(command + ": option --" + name + " needs an integer, got '" + value + "'");
        }
    }
}
