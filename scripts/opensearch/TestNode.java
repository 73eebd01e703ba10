import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.settings.Settings;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.transport.Netty4Plugin;

/**
 * A single OpenSearch node for the integration tests, run from the jars that
 * scripts/opensearch.sh resolves from Maven Central (no distribution archive,
 * no plugin installer): the plugins a REST client needs are loaded from the
 * class path, which only Node's protected constructor allows.
 *
 * <pre>java -cp JARS:CLASSES TestNode HOME HTTP_PORT TRANSPORT_PORT</pre>
 *
 * HOME holds data/ and logs/. Every listener is on 127.0.0.1. SIGTERM closes
 * the node.
 */
public final class TestNode extends Node {
    private TestNode(Settings settings, Path home) {
        super(InternalSettingsPreparer.prepareEnvironment(settings, Map.of(), home.resolve("config"), () -> "antidote-test"),
              List.of(Netty4Plugin.class, CommonAnalysisPlugin.class), true);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: TestNode HOME HTTP_PORT TRANSPORT_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Settings settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "antidote-test")
            .put("node.name", "antidote-test")
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", args[1])
            .put("transport.port", args[2])
            .put("http.type", "netty4")
            .put("transport.type", "netty4")
            // A test machine's disk may be fuller than a production
            // watermark: never turn indices read-only for that.
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", true)
            .build();
        Node node = new TestNode(settings, home);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                closed.countDown();
            }
        }));
        node.start();
        System.out.println("antidote-test node started: http://127.0.0.1:" + args[1]);
        closed.await();
    }
}
