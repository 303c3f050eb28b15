package labkit.participant;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The experiment's history, written as labkit's Python participants write it (labkit/core/history.py): one JSON object
 * per line in UTF-8 (whatever the platform's charset), each line one write() on a file opened with O_APPEND, so lines
 * of concurrent processes never interleave.
 * Times are System.nanoTime(), which HotSpot reads from CLOCK_MONOTONIC, the clock of Python's time.monotonic_ns().
 */
final class History {
    static final ObjectMapper JSON = new ObjectMapper();
    private final Path path;

    History(String path) {
        this.path = Path.of(path);
        try { // Jackson's first serialization loads and builds its serializers (~0.2 s): at start, not in the loop
            JSON.writeValueAsString(Map.of("batch", Map.of("mono_ns", List.of(1L), "value_id", List.of("v"))));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** One event now: kind, participant, then field name / value pairs (null values left out). */
    void append(String kind, String participant, Object... fields) {
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("kind", kind);
        record.put("participant", participant);
        record.put("mono_ns", System.nanoTime());
        record.put("wall_ms", System.currentTimeMillis());
        put(record, fields);
        write(record);
    }

    /** Many events of one kind in one line: columns of equal length (mono_ns among them), shared fields beside. */
    void appendBatch(String kind, String participant, Map<String, List<?>> columns, Object... shared) {
        if (columns.values().iterator().next().isEmpty()) {
            return;
        }
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("kind", kind);
        record.put("participant", participant);
        record.put("wall_ms", System.currentTimeMillis());
        put(record, shared);
        record.put("batch", columns);
        write(record);
    }

    /**
     * Every whole line so far, batches not expanded (the Java side reads only single events), by the rule of
     * labkit.core.history.History.events, its twin: a line ends at a '\n' byte and nowhere else (Jackson leaves
     * U+2028 and U+0085 raw inside a string: line breaks to Python's str.splitlines, not to JSON); a last line
     * without its '\n' is still being written by another process, or was cut by a SIGKILL, and is left out; blank
     * lines are skipped.
     *
     * @throws UncheckedIOException the file cannot be read, or a whole line is not JSON
     */
    List<JsonNode> lines() {
        List<JsonNode> out = new ArrayList<>();
        try {
            byte[] data = Files.readAllBytes(path);
            int whole = data.length;
            while (whole > 0 && data[whole - 1] != '\n') {
                whole--;
            }
            for (String line : new String(data, 0, whole, StandardCharsets.UTF_8).split("\n")) {
                if (!line.isBlank()) {
                    out.add(JSON.readTree(line));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }

    private static void put(Map<String, Object> record, Object[] fields) {
        for (int i = 0; i < fields.length; i += 2) {
            if (fields[i + 1] != null) {
                record.put((String) fields[i], fields[i + 1]);
            }
        }
    }

    private synchronized void write(Map<String, Object> record) {
        try (FileChannel out = FileChannel.open(path, StandardOpenOption.WRITE, StandardOpenOption.APPEND,
                StandardOpenOption.CREATE)) {
            byte[] line = (JSON.writeValueAsString(record) + "\n").getBytes(StandardCharsets.UTF_8);
            ByteBuffer bytes = ByteBuffer.wrap(line);
            while (bytes.hasRemaining()) {
                out.write(bytes);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
