package cepbench;

import com.espertech.esper.common.client.EPCompiled;
import com.espertech.esper.common.client.EventBean;
import com.espertech.esper.common.client.EventType;
import com.espertech.esper.common.client.configuration.Configuration;
import com.espertech.esper.compiler.client.CompilerArguments;
import com.espertech.esper.compiler.client.EPCompilerProvider;
import com.espertech.esper.runtime.client.EPDeployment;
import com.espertech.esper.runtime.client.EPEventService;
import com.espertech.esper.runtime.client.EPRuntime;
import com.espertech.esper.runtime.client.EPRuntimeProvider;
import com.espertech.esper.runtime.client.EPStatement;
import com.espertech.esper.runtime.client.UpdateListener;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * The Esper side of the cep benchmark.
 *
 * <p>Reads the same JSON-lines file that {@code cep run} reads, sends every record to the EPL statements
 * in {@code --epl} as a Map event of the record's type (the types are declared in the EPL file with
 * {@code create map schema}), writes one JSON line per composite event to {@code --output} and prints one
 * JSON object of metrics on stdout. Time is external: before each event the runtime clock is advanced to
 * the record's time field (times {@code --time-scale}, to milliseconds), so {@code timer:within} and time
 * windows run on event time exactly as the cep engine does.
 *
 * <p>Measured the same way as the Python harness: a parse-only pass first (the floor, same reader, same
 * run), then the full pass with the latency of each record from before it is parsed until its composite
 * events are written, and the peak used heap sampled every {@code --mem-every} records.
 */
public final class EsperRunner {

    private static long composites = 0;

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parseArgs(argv);
        String eplPath = need(args, "epl");
        String input = need(args, "input");
        String output = args.getOrDefault("output", "/dev/null");
        String typeField = args.getOrDefault("type-field", "type");
        String timeField = args.getOrDefault("time-field", "ts");
        double timeScale = Double.parseDouble(args.getOrDefault("time-scale", "1000"));
        int memEvery = Integer.parseInt(args.getOrDefault("mem-every", "1000"));
        boolean floorPass = !args.containsKey("no-floor");
        // cep decides every pending match at the end of a bounded input (watermark +infinity); the
        // counterpart here is moving the clock this far past the last record, firing every timer
        long endAdvanceMs = Long.parseLong(args.getOrDefault("end-advance-ms", "0"));
        // record type -> EPL event type, for record types that are EPL keywords (Order): "Order=OrderEvent,..."
        Map<String, String> typeMap = new HashMap<>();
        for (String pair : args.getOrDefault("type-map", "").split(",")) {
            if (!pair.isBlank()) {
                String[] kv = pair.split("=", 2);
                typeMap.put(kv[0].trim(), kv[1].trim());
            }
        }

        String epl = Files.readString(Path.of(eplPath));
        Configuration config = new Configuration();
        config.getRuntime().getThreading().setInternalTimerEnabled(false);
        config.getRuntime().getExecution().setPrioritized(false);
        long tc0 = System.nanoTime();
        EPCompiled compiled = EPCompilerProvider.getCompiler().compile(epl, new CompilerArguments(config));
        EPRuntime runtime = EPRuntimeProvider.getRuntime("cepbench", config);
        runtime.getEventService().clockExternal();
        runtime.getEventService().advanceTime(0);
        EPDeployment deployment = runtime.getDeploymentService().deploy(compiled);
        double compileSeconds = (System.nanoTime() - tc0) / 1e9;

        BufferedWriter out = new BufferedWriter(
                new OutputStreamWriter(new FileOutputStream(output), StandardCharsets.UTF_8), 1 << 16);
        UpdateListener listener = (newEvents, oldEvents, statement, rt) -> {
            if (newEvents == null) {
                return;
            }
            String name = statement.getName();
            for (EventBean bean : newEvents) {
                composites++;
                writeComposite(out, name, bean);
            }
        };
        for (EPStatement st : deployment.getStatements()) {
            st.addListener(listener);
        }

        Map<String, Map<String, Class<?>>> schemas = new HashMap<>();
        String deploymentId = deployment.getDeploymentId();

        // Floor: read and parse every record with the same reader, nothing else.
        double floorSeconds = -1;
        long records = 0;
        if (floorPass) {
            long t0 = System.nanoTime();
            long sink = 0;
            try (BufferedReader in = reader(input)) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.isBlank()) {
                        continue;
                    }
                    Map<String, Object> rec = JsonLine.parse(line);
                    sink += rec.size();
                }
            }
            floorSeconds = (System.nanoTime() - t0) / 1e9;
            if (sink < 0) {
                System.err.println(sink);
            }
        }

        EPEventService events = runtime.getEventService();
        long[] latency = new long[1 << 16];
        long peakHeap = 0;
        Runtime jvm = Runtime.getRuntime();
        long now = 0;
        long c0 = processCpuNanos();
        long t0 = System.nanoTime();
        try (BufferedReader in = reader(input)) {
            String line;
            while ((line = in.readLine()) != null) {
                long r0 = System.nanoTime();
                if (line.isBlank()) {
                    continue;
                }
                Map<String, Object> rec = JsonLine.parse(line);
                String type = typeMap.getOrDefault((String) rec.get(typeField), (String) rec.get(typeField));
                Map<String, Class<?>> schema = schemas.get(type);
                if (schema == null && !schemas.containsKey(type)) {
                    EventType et = runtime.getEventTypeService().getEventType(deploymentId, type);
                    schema = et == null ? null : propertyTypes(et);
                    schemas.put(type, schema);
                }
                if (schema == null) {
                    continue; // a type no statement declares: nothing can match it
                }
                coerce(rec, schema);
                Object ts = rec.get(timeField);
                long ms = Math.round(((Number) ts).doubleValue() * timeScale);
                if (ms > now) {
                    events.advanceTime(ms);
                    now = ms;
                }
                events.sendEventMap(rec, type);
                long r1 = System.nanoTime();
                if (records == latency.length) {
                    latency = Arrays.copyOf(latency, latency.length * 2);
                }
                latency[(int) records] = r1 - r0;
                records++;
                if (records % memEvery == 0) {
                    long used = jvm.totalMemory() - jvm.freeMemory();
                    if (used > peakHeap) {
                        peakHeap = used;
                    }
                }
            }
        }
        if (endAdvanceMs > 0) {
            events.advanceTimeSpan(now + endAdvanceMs);
        }
        out.flush();
        double runSeconds = (System.nanoTime() - t0) / 1e9;
        double cpuSeconds = (processCpuNanos() - c0) / 1e9;
        long used = jvm.totalMemory() - jvm.freeMemory();
        if (used > peakHeap) {
            peakHeap = used;
        }
        out.close();
        long[] lat = Arrays.copyOf(latency, (int) records);
        Arrays.sort(lat);
        double p50 = records == 0 ? 0 : lat[(int) Math.min(records - 1, records / 2)] / 1e3;
        double p99 = records == 0 ? 0 : lat[(int) Math.min(records - 1, (long) Math.ceil(records * 0.99) - 1)] / 1e3;
        System.out.println("{\"system\":\"esper\",\"records\":" + records
                + ",\"composites\":" + composites
                + ",\"compile_s\":" + compileSeconds
                + ",\"floor_s\":" + floorSeconds
                + ",\"run_s\":" + runSeconds
                + ",\"cpu_s\":" + cpuSeconds
                + ",\"p50_us\":" + p50
                + ",\"p99_us\":" + p99
                + ",\"peak_heap_mb\":" + (peakHeap / 1048576.0)
                + ",\"vmhwm_mb\":" + vmHwmMb()
                + ",\"esper_version\":\"" + com.espertech.esper.runtime.client.util.RuntimeVersion.RUNTIME_VERSION + "\"}");
        runtime.destroy();
    }

    /** CPU time of the whole JVM (every thread: the JIT compilers and the collector work for the run too). */
    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                .getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /** Peak resident memory of this process (VmHWM; ru_maxrss would include the parent's, see run_cep.py). */
    private static double vmHwmMb() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024.0;
                }
            }
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
        return -1;
    }

    private static BufferedReader reader(String path) throws IOException {
        return new BufferedReader(new InputStreamReader(new FileInputStream(path), StandardCharsets.UTF_8), 1 << 16);
    }

    private static Map<String, Class<?>> propertyTypes(EventType t) {
        Map<String, Class<?>> m = new HashMap<>();
        for (String p : t.getPropertyNames()) {
            Class<?> c = t.getPropertyType(p);
            m.put(p, c);
        }
        return m;
    }

    /** JSON numbers arrive as Long or Double; the schema decides which one the event carries. */
    private static void coerce(Map<String, Object> rec, Map<String, Class<?>> schema) {
        for (Map.Entry<String, Object> e : rec.entrySet()) {
            Object v = e.getValue();
            if (!(v instanceof Number)) {
                continue;
            }
            Class<?> c = schema.get(e.getKey());
            if (c == null) {
                continue;
            }
            if ((c == Double.class || c == double.class) && !(v instanceof Double)) {
                e.setValue(((Number) v).doubleValue());
            } else if ((c == Long.class || c == long.class) && !(v instanceof Long)) {
                e.setValue(((Number) v).longValue());
            } else if ((c == Integer.class || c == int.class) && !(v instanceof Integer)) {
                e.setValue(((Number) v).intValue());
            }
        }
    }

    private static void writeComposite(BufferedWriter out, String statement, EventBean bean) {
        StringBuilder sb = new StringBuilder(128);
        sb.append("{\"pattern\":\"").append(statement).append("\",\"op\":\"+\",\"match\":{");
        boolean first = true;
        for (String p : bean.getEventType().getPropertyNames()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append('"').append(p).append("\":");
            JsonLine.appendValue(sb, bean.get(p));
        }
        sb.append("}}\n");
        try {
            out.write(sb.toString());
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    private static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + a);
            }
            String key = a.substring(2);
            if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                m.put(key, argv[++i]);
            } else {
                m.put(key, "true");
            }
        }
        return m;
    }

    private static String need(Map<String, String> args, String key) {
        String v = args.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return v;
    }
}
