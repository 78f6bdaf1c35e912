"""Entry file for spark-submit / the SparkApplication (mainApplicationFile): the image copies it
to /opt/jbod/spark/main.py and installs the project (``pip install '.[spark]'``)."""

import sys

from jbod_spark.job import main

if __name__ == "__main__":
    sys.exit(main())
