package dev.antidote.bench;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.retrytopic.RetryTopicConfiguration;
import org.springframework.kafka.retrytopic.RetryTopicConfigurationBuilder;
import org.springframework.kafka.retrytopic.RetryTopicConfigurationSupport;
import org.springframework.scheduling.TaskScheduler;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;
import org.springframework.util.backoff.BackOff;
import org.springframework.util.backoff.BackOffExecution;

/**
 * Consumes a bench/retrytopics ordered-workload topic with Spring Kafka's non-blocking retries
 * (@RetryableTopic's machinery: a RetryTopicConfiguration) with tiers of the same delays as the
 * Antidote side, one listener container per partition. Each record's value says how many times
 * it fails; a failure goes to the next retry topic. The handler checks per-key order: a record
 * that succeeds while an earlier record of its key has not is a violation. Prints one line of
 * JSON: the records that never fail per second, from the first handler call to the last of them;
 * the same for the records of free keys (no record of the key fails); the time from the last of
 * those to the last record that never fails; the time until every record succeeded; and the
 * violations.
 *
 * <p>Arguments: brokers topic records partitions delaysMs(comma-separated) seekAfterError(true|false)
 * suffix timeoutSeconds
 */
public final class SpringRetryBench {
  static String brokers;
  public static String topic;
  public static String suffix;
  static int partitions;
  static long[] delays;
  static boolean seekAfterError;

  static final AtomicLong first = new AtomicLong();
  static final AtomicLong lastGood = new AtomicLong();
  static final AtomicLong lastFree = new AtomicLong();
  static final AtomicLong free = new AtomicLong();
  static final AtomicLong last = new AtomicLong();
  static final AtomicLong good = new AtomicLong();
  static final AtomicLong done = new AtomicLong();
  static final AtomicLong violations = new AtomicLong();
  static final AtomicLong duplicates = new AtomicLong();
  static final ConcurrentHashMap<Integer, AtomicInteger> attempts = new ConcurrentHashMap<>();
  static final Set<Integer> succeeded = ConcurrentHashMap.newKeySet();
  static final Map<String, KeyOrder> keys = new HashMap<>();
  static CountDownLatch finished;

  /** What succeeded of one key: the next sequence number due, and those done past it. */
  static final class KeyOrder {
    int next;
    final TreeSet<Integer> ahead = new TreeSet<>();
  }

  public static void main(String[] args) throws Exception {
    brokers = args[0];
    topic = args[1];
    int n = Integer.parseInt(args[2]);
    partitions = Integer.parseInt(args[3]);
    String[] ds = args[4].split(",");
    delays = new long[ds.length];
    for (int i = 0; i < ds.length; i++) {
      delays[i] = Long.parseLong(ds[i]);
    }
    seekAfterError = Boolean.parseBoolean(args[5]);
    suffix = args[6];
    long timeoutSeconds = Long.parseLong(args[7]);
    finished = new CountDownLatch(n);

    try (AnnotationConfigApplicationContext ctx =
        new AnnotationConfigApplicationContext(Support.class, Beans.class, Listener.class)) {
      if (!finished.await(timeoutSeconds, TimeUnit.SECONDS)) {
        System.err.println("spring: " + done.get() + " of " + n + " records in " + timeoutSeconds + "s");
        System.exit(1);
      }
      long window = lastGood.get() - first.get();
      long freeWindow = lastFree.get() - first.get();
      System.out.printf(
          Locale.ROOT,
          "{\"rate\":%.1f,\"free_rate\":%.1f,\"order_tail_ns\":%d,\"window_ns\":%d,\"total_ns\":%d,\"good\":%d,\"done\":%d,\"violations\":%d,\"duplicates\":%d}%n",
          good.get() / (window / 1e9), free.get() / (freeWindow / 1e9), lastGood.get() - lastFree.get(),
          window, last.get() - first.get(), good.get(), done.get(), violations.get(), duplicates.get());
      System.out.flush();
    }
    System.exit(0);
  }

  /** Spring's retry-topic support, told whether its error handler seeks after an error. */
  @Configuration
  public static class Support extends RetryTopicConfigurationSupport {
    @Override
    protected void configureCustomizers(CustomizersConfigurer c) {
      c.customizeErrorHandler(eh -> eh.setSeekAfterError(seekAfterError));
    }

    @Bean
    TaskScheduler taskScheduler() {
      return new ThreadPoolTaskScheduler();
    }
  }

  @Configuration
  @EnableKafka
  public static class Beans {
    /** Creates the retry and dead-letter topics (autoCreateTopics) with the source's partitions. */
    @Bean
    KafkaAdmin admin() {
      return new KafkaAdmin(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, brokers));
    }

    @Bean
    ConsumerFactory<String, String> consumerFactory() {
      Map<String, Object> p = new HashMap<>();
      p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
      p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
      p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
      p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
      return new DefaultKafkaConsumerFactory<>(p);
    }

    @Bean
    ProducerFactory<String, String> producerFactory() {
      Map<String, Object> p = new HashMap<>();
      p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
      p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
      p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
      return new DefaultKafkaProducerFactory<>(p);
    }

    @Bean
    KafkaTemplate<String, String> kafkaTemplate(ProducerFactory<String, String> pf) {
      return new KafkaTemplate<>(pf);
    }

    @Bean
    ConcurrentKafkaListenerContainerFactory<String, String> kafkaListenerContainerFactory(
        ConsumerFactory<String, String> cf) {
      ConcurrentKafkaListenerContainerFactory<String, String> f =
          new ConcurrentKafkaListenerContainerFactory<>();
      f.setConsumerFactory(cf);
      f.setConcurrency(partitions);
      return f;
    }

    @Bean
    RetryTopicConfiguration retryTopics(KafkaTemplate<String, String> template) {
      return RetryTopicConfigurationBuilder.newInstance()
          .customBackoff(new Tiers())
          .maxAttempts(delays.length + 1)
          .retryTopicSuffix("-retry-" + suffix)
          .dltSuffix("-dlt-" + suffix)
          .autoCreateTopics(true, partitions, (short) -1)
          .includeTopic(topic)
          .create(template);
    }
  }

  /** The tiers' delays in turn, then no more. */
  static final class Tiers implements BackOff {
    @Override
    public BackOffExecution start() {
      return new BackOffExecution() {
        int i;

        @Override
        public long nextBackOff() {
          return i < delays.length ? delays[i++] : STOP;
        }
      };
    }
  }

  public static class Listener {
    @KafkaListener(id = "bench", topics = "#{T(dev.antidote.bench.SpringRetryBench).topic}",
        groupId = "#{'rtbench-spring-' + T(dev.antidote.bench.SpringRetryBench).suffix}")
    public void handle(ConsumerRecord<String, String> r) {
      long now = System.nanoTime();
      first.compareAndSet(0, now);
      String v = r.value();
      int id = field(v, "\"id\":");
      int seq = field(v, "\"seq\":");
      int fails = field(v, "\"fails\":");
      int isFree = field(v, "\"free\":");
      if (attempts.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet() <= fails) {
        throw new IllegalStateException("flaky dependency");
      }
      if (!succeeded.add(id)) {
        duplicates.incrementAndGet(); // handled again after a rebalance
        return;
      }
      synchronized (keys) {
        KeyOrder k = keys.computeIfAbsent(r.key(), x -> new KeyOrder());
        if (seq != k.next) {
          violations.incrementAndGet(); // an earlier record of the key has not succeeded
          k.ahead.add(seq);
        } else {
          k.next++;
          while (k.ahead.remove(k.next)) {
            k.next++;
          }
        }
      }
      now = System.nanoTime();
      if (fails == 0) {
        good.incrementAndGet();
        lastGood.accumulateAndGet(now, Math::max);
      }
      if (isFree == 1) {
        free.incrementAndGet();
        lastFree.accumulateAndGet(now, Math::max);
      }
      last.accumulateAndGet(now, Math::max);
      done.incrementAndGet();
      finished.countDown();
    }
  }

  /** The integer after name in a flat JSON object. */
  static int field(String v, String name) {
    int i = v.indexOf(name) + name.length();
    int j = i;
    while (j < v.length() && Character.isDigit(v.charAt(j))) {
      j++;
    }
    return Integer.parseInt(v, i, j, 10);
  }
}
