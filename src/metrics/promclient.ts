// prom-client's metric types and registry, without the rest of its index: that loads Node's
// cluster, zlib and http modules (for the aggregator and the Pushgateway) and OpenTelemetry,
// about 10 MiB of RSS that labeller never uses (bench/README.md, "Where the CPU and memory go").
import Counter from 'prom-client/lib/counter.js';
import Gauge from 'prom-client/lib/gauge.js';
import Histogram from 'prom-client/lib/histogram.js';
import Registry from 'prom-client/lib/registry.js';

export { Counter, Gauge, Histogram, Registry };
