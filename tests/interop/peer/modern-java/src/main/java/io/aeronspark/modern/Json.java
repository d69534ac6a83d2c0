package io.aeronspark.modern;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One JSON object printed as one stdout line. Keys keep their insertion order; values may be
 * strings, numbers, booleans, null, other {@code Json} objects or lists of them.
 */
final class Json
{
    private final Map<String, Object> fields = new LinkedHashMap<>();

    static Json event(final String name)
    {
        return new Json().put("event", name);
    }

    static Json object()
    {
        return new Json();
    }

    Json put(final String key, final Object value)
    {
        fields.put(key, value);
        return this;
    }

    /** Prints the line and flushes at once: a reader may be blocked waiting for exactly this line. */
    void emit()
    {
        synchronized (System.out)
        {
            System.out.println(this);
            System.out.flush();
        }
    }

    @Override
    public String toString()
    {
        final StringBuilder out = new StringBuilder(128);
        write(out, this);
        return out.toString();
    }

    private static void write(final StringBuilder out, final Object value)
    {
        if (value == null)
        {
            out.append("null");
        }
        else if (value instanceof Json json)
        {
            out.append('{');
            String separator = "";
            for (final Map.Entry<String, Object> entry : json.fields.entrySet())
            {
                out.append(separator);
                separator = ", ";
                quote(out, entry.getKey());
                out.append(": ");
                write(out, entry.getValue());
            }
            out.append('}');
        }
        else if (value instanceof Iterable<?> items)
        {
            out.append('[');
            String separator = "";
            for (final Object item : items)
            {
                out.append(separator);
                separator = ", ";
                write(out, item);
            }
            out.append(']');
        }
        else if (value instanceof Number || value instanceof Boolean)
        {
            out.append(value);
        }
        else
        {
            quote(out, value.toString());
        }
    }

    private static void quote(final StringBuilder out, final String text)
    {
        out.append('"');
        for (int i = 0; i < text.length(); i++)
        {
            final char c = text.charAt(i);
            switch (c)
            {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default ->
                {
                    if (c < 0x20)
                    {
                        out.append(String.format("\\u%04x", (int)c));
                    }
                    else
                    {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
