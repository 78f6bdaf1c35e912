# Apache Kafka's own jars (broker, tools, clients, storage and their dependencies) from Maven
# Central, for the tests and benches that run Kafka's code beside ours: its dump tool on our
# segments, a KRaft broker as the yardstick. Included by the root Makefile
# (`-include mk/kafka.mk`); also usable alone: `make -f mk/kafka.mk kafka-jars`.
#
#   make kafka-jars         copy the jars once into $(KAFKA_LIBS_DIR) (a cache outside the repo)
#   make kafka-jars-clean   forget them
#
# Idempotent: a stamp named after the pom's hash says the cache holds exactly what the pom
# names, so a second run only hashes one file.

_kafka_saved_default_goal := $(.DEFAULT_GOAL)

KAFKA_POM := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/kafka/pom.xml)

# The version is pinned in the pom only (tests/kafka_jars.py reads it from there too).
KAFKA_VERSION ?= $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' $(KAFKA_POM))
KAFKA_LIBS_DIR ?= $(HOME)/.cache/jbod-operator/kafka-$(KAFKA_VERSION)/libs
override KAFKA_LIBS_DIR := $(abspath $(KAFKA_LIBS_DIR))
KAFKA_POM_HASH := $(shell sha1sum $(KAFKA_POM) | cut -c1-12)
KAFKA_STAMP := $(KAFKA_LIBS_DIR)/.complete-$(KAFKA_POM_HASH)
KAFKA_MVN ?= mvn

.PHONY: kafka-jars kafka-jars-clean

kafka-jars: $(KAFKA_STAMP)
	@echo "kafka-jars: $(KAFKA_LIBS_DIR) (Apache Kafka $(KAFKA_VERSION), $$(ls $(KAFKA_LIBS_DIR)/*.jar | wc -l) jars)"

# Copied into a fresh folder and renamed into place, so an interrupted run never leaves a
# half-filled cache that a stamp vouches for.
$(KAFKA_STAMP): $(KAFKA_POM)
	@test -n "$(KAFKA_VERSION)" || { echo "cannot read kafka.version from $(KAFKA_POM)" >&2; exit 1; }
	@echo "fetching Apache Kafka $(KAFKA_VERSION) jars -> $(KAFKA_LIBS_DIR)"
	@start=$$(date +%s); \
	rm -rf $(KAFKA_LIBS_DIR).tmp && \
	$(KAFKA_MVN) -q -B -Dstyle.color=never -f $(KAFKA_POM) dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(KAFKA_LIBS_DIR).tmp && \
	rm -rf $(KAFKA_LIBS_DIR) && mv $(KAFKA_LIBS_DIR).tmp $(KAFKA_LIBS_DIR) && \
	touch $@ && echo "kafka-jars: fetched in $$(( $$(date +%s) - start ))s" \
	|| { rm -rf $(KAFKA_LIBS_DIR).tmp; exit 1; }

kafka-jars-clean:
	rm -rf $(KAFKA_LIBS_DIR)

.DEFAULT_GOAL := $(_kafka_saved_default_goal)
