package cepbench;

import java.util.HashMap;
import java.util.Map;

/**
 * A reader for one flat JSON object per line (the benchmark's input: scalar values only) and a writer of
 * scalar JSON values (and of a subquery row, a Map, as an object). Hand-written so the Esper side needs no JSON library and parses about as much as
 * orjson does on the Python side.
 */
final class JsonLine {
    private final String s;
    private int i;

    private JsonLine(String s) {
        this.s = s;
    }

    static Map<String, Object> parse(String line) {
        JsonLine p = new JsonLine(line);
        return p.object();
    }

    private Map<String, Object> object() {
        Map<String, Object> m = new HashMap<>(16);
        skip();
        expect('{');
        skip();
        if (peek() == '}') {
            i++;
            return m;
        }
        while (true) {
            skip();
            String key = string();
            skip();
            expect(':');
            skip();
            m.put(key, value());
            skip();
            char c = s.charAt(i++);
            if (c == '}') {
                return m;
            }
            if (c != ',') {
                throw new IllegalArgumentException("bad JSON at " + (i - 1) + ": " + s);
            }
        }
    }

    private Object value() {
        char c = peek();
        if (c == '"') {
            return string();
        }
        if (s.startsWith("true", i)) {
            i += 4;
            return Boolean.TRUE;
        }
        if (s.startsWith("false", i)) {
            i += 5;
            return Boolean.FALSE;
        }
        if (s.startsWith("null", i)) {
            i += 4;
            return null;
        }
        int start = i;
        boolean real = false;
        while (i < s.length()) {
            char d = s.charAt(i);
            if (d == '.' || d == 'e' || d == 'E') {
                real = true;
            } else if (!(d == '-' || d == '+' || (d >= '0' && d <= '9'))) {
                break;
            }
            i++;
        }
        String num = s.substring(start, i);
        if (num.isEmpty()) {
            throw new IllegalArgumentException("bad JSON value at " + start + ": " + s);
        }
        return real ? (Object) Double.parseDouble(num) : (Object) Long.parseLong(num);
    }

    private String string() {
        expect('"');
        StringBuilder sb = null;
        int start = i;
        while (true) {
            char c = s.charAt(i++);
            if (c == '"') {
                return sb == null ? s.substring(start, i - 1) : sb.toString();
            }
            if (c == '\\') {
                if (sb == null) {
                    sb = new StringBuilder(s.substring(start, i - 1));
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': sb.append('\n'); break;
                    case 't': sb.append('\t'); break;
                    case 'r': sb.append('\r'); break;
                    case 'b': sb.append('\b'); break;
                    case 'f': sb.append('\f'); break;
                    case 'u': sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: sb.append(e);
                }
            } else if (sb != null) {
                sb.append(c);
            }
        }
    }

    private char peek() {
        return s.charAt(i);
    }

    private void expect(char c) {
        if (s.charAt(i) != c) {
            throw new IllegalArgumentException("expected '" + c + "' at " + i + ": " + s);
        }
        i++;
    }

    private void skip() {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
    }

    static void appendValue(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            sb.append('"');
            String str = (String) v;
            for (int k = 0; k < str.length(); k++) {
                char c = str.charAt(k);
                if (c == '"' || c == '\\') {
                    sb.append('\\').append(c);
                } else if (c < 0x20) {
                    sb.append(String.format("\\u%04x", (int) c));
                } else {
                    sb.append(c);
                }
            }
            sb.append('"');
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            // a multi-column subquery's row: a nested object, as cep writes EMIT items
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                appendValue(sb, String.valueOf(e.getKey()));
                sb.append(':');
                appendValue(sb, e.getValue());
            }
            sb.append('}');
        } else {
            appendValue(sb, v.toString());
        }
    }
}
