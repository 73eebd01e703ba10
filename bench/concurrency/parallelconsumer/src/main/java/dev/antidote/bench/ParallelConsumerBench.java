package dev.antidote.bench;

import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Consumes a bench/concurrency topic with Confluent's Parallel Consumer, KEY ordering, at a
 * given number of handler calls in flight (maxConcurrency), with a handler that waits per record
 * and checks each key's sequence numbers. Prints one line of JSON: records/s from the first
 * handler call to the last, the handler's mean time, the process CPU per record over that
 * window, and the per-key order violations.
 *
 * <p>Arguments: brokers topic records inflight workMicros
 */
public final class ParallelConsumerBench {
  public static void main(String[] args) throws Exception {
    String brokers = args[0];
    String topic = args[1];
    int n = Integer.parseInt(args[2]);
    int inflight = Integer.parseInt(args[3]);
    long workNanos = Long.parseLong(args[4]) * 1000;

    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, "concbench-pc-" + inflight + "-" + System.nanoTime());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    KafkaConsumer<String, String> kc = new KafkaConsumer<>(p);

    ParallelConsumerOptions<String, String> opts =
        ParallelConsumerOptions.<String, String>builder()
            .ordering(ProcessingOrder.KEY)
            .maxConcurrency(inflight)
            .commitMode(CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS)
            .consumer(kc)
            .build();
    ParallelStreamProcessor<String, String> pc =
        ParallelStreamProcessor.createEosStreamProcessor(opts);

    ConcurrentHashMap<String, Integer> next = new ConcurrentHashMap<>();
    AtomicLong violations = new AtomicLong();
    AtomicLong done = new AtomicLong();
    AtomicLong busy = new AtomicLong();
    AtomicLong first = new AtomicLong();
    AtomicLong last = new AtomicLong();
    AtomicLong cpu0 = new AtomicLong();
    CountDownLatch finished = new CountDownLatch(1);
    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    pc.subscribe(List.of(topic));
    pc.poll(
        ctx -> {
          ConsumerRecord<String, String> r = ctx.getSingleConsumerRecord();
          long t0 = System.nanoTime();
          if (first.compareAndSet(0, t0)) {
            cpu0.set(os.getProcessCpuTime());
          }
          sleepNanos(workNanos);
          int seq = Integer.parseInt(r.value());
          // One key is handled by one call at a time (KEY ordering): the
          // map's atomic update sees the key's calls in order.
          next.compute(
              r.key(),
              (k, want) -> {
                if (want != null ? seq != want : seq != 0) {
                  violations.incrementAndGet();
                }
                return seq + 1;
              });
          long now = System.nanoTime();
          busy.addAndGet(now - t0);
          last.set(now);
          if (done.incrementAndGet() == n) {
            finished.countDown();
          }
        });
    if (!finished.await(30, TimeUnit.MINUTES)) {
      System.err.println("parallel consumer: " + done.get() + " of " + n + " records in 30 minutes");
      System.exit(1);
    }
    long cpu = os.getProcessCpuTime() - cpu0.get();
    long window = last.get() - first.get();
    pc.closeDontDrainFirst(Duration.ofSeconds(30));
    System.out.printf(
        "{\"rate\":%.1f,\"window_ns\":%d,\"handler_ns\":%d,\"cpu_us_per_record\":%.2f,\"violations\":%d}%n",
        n / (window / 1e9), window, busy.get() / n, cpu / 1000.0 / n, violations.get());
    System.exit(0);
  }

  private static void sleepNanos(long nanos) {
    try {
      Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
