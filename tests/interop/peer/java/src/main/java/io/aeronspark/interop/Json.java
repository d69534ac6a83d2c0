package io.aeronspark.interop;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One JSON object written as one line on stdout. Field order is kept so output stays readable;
 * only the types the peer needs are supported (strings, numbers, booleans, null, nested objects, lists).
 */
final class Json
{
    private final Map<String, Object> fields = new LinkedHashMap<>();

    static Json object()
    {
        return new Json();
    }

    static Json event(final String name)
    {
        return new Json().put("event", name);
    }

    Json put(final String key, final Object value)
    {
        fields.put(key, value);
        return this;
    }

    /** Prints the object as a single line and flushes, so a reader waiting on the line sees it at once. */
    void emit()
    {
        synchronized (System.out)
        {
            System.out.println(toString());
            System.out.flush();
        }
    }

    @Override
    public String toString()
    {
        final StringBuilder out = new StringBuilder();
        appendObject(out, fields);
        return out.toString();
    }

    private static void appendObject(final StringBuilder out, final Map<String, Object> map)
    {
        out.append('{');
        boolean first = true;
        for (final Map.Entry<String, Object> entry : map.entrySet())
        {
            if (!first)
            {
                out.append(", ");
            }
            first = false;
            appendString(out, entry.getKey());
            out.append(": ");
            appendValue(out, entry.getValue());
        }
        out.append('}');
    }

    @SuppressWarnings("unchecked")
    private static void appendValue(final StringBuilder out, final Object value)
    {
        if (value == null)
        {
            out.append("null");
        }
        else if (value instanceof Json)
        {
            appendObject(out, ((Json)value).fields);
        }
        else if (value instanceof Map)
        {
            appendObject(out, (Map<String, Object>)value);
        }
        else if (value instanceof Iterable)
        {
            out.append('[');
            boolean first = true;
            for (final Object item : (Iterable<Object>)value)
            {
                if (!first)
                {
                    out.append(", ");
                }
                first = false;
                appendValue(out, item);
            }
            out.append(']');
        }
        else if (value instanceof Number || value instanceof Boolean)
        {
            out.append(value);
        }
        else
        {
            appendString(out, value.toString());
        }
    }

    private static void appendString(final StringBuilder out, final String text)
    {
        out.append('"');
        for (int i = 0; i < text.length(); i++)
        {
            final char c = text.charAt(i);
            switch (c)
            {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
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
        out.append('"');
    }
}
