#!/bin/sh
# Compile the prototype against the installed PySpark's jars into build/compactlog-spark.jar.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
rm -rf "$here/build" && mkdir -p "$here/build/classes"
javac -nowarn -d "$here/build/classes" -cp "$jars/*" $(find "$here/src" -name '*.java')
jar cf "$here/build/compactlog-spark.jar" -C "$here/build/classes" .
echo "$here/build/compactlog-spark.jar"
