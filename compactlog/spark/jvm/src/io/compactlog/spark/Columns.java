package io.compactlog.spark;

import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** The source's nine columns (CONTRACT section 14), in their order. */
final class Columns {
  static final int KEY = 0;
  static final int VALUE = 1;
  static final int TOPIC = 2;
  static final int PARTITION = 3;
  static final int LEDGER_ID = 4;
  static final int ENTRY_ID = 5;
  static final int PUBLISH_TIME = 6;
  static final int EVENT_TIME = 7;
  static final int PROPERTIES = 8;

  static final StructType SCHEMA =
      new StructType()
          .add("key", DataTypes.BinaryType)
          .add("value", DataTypes.BinaryType)
          .add("topic", DataTypes.StringType)
          .add("partition", DataTypes.IntegerType)
          .add("ledger_id", DataTypes.LongType)
          .add("entry_id", DataTypes.LongType)
          .add("publish_time", DataTypes.TimestampType)
          .add("event_time", DataTypes.TimestampType)
          .add("properties", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType));

  private Columns() {}

  /** The source column of each field of a pruned schema. */
  static int[] indexes(StructType required) {
    int[] out = new int[required.fields().length];
    for (int i = 0; i < out.length; i++) {
      out[i] = SCHEMA.fieldIndex(required.fields()[i].name());
    }
    return out;
  }
}
