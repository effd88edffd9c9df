// What lotline needs to know of one Spark write, gathered inside the driver's JVM in one call.
//
// Compiled at run time by Janino (the Java compiler Spark itself ships for code generation) when the
// query listener is registered (lotline.spark.capture); no jar to install. Janino compiles a subset
// of Java: no generics (casts instead), no lambdas. describe(qe) answers null for a query that is not
// a file write, else one JSON object:
//
//   {"path": "<output path>", "metrics": {"numOutputRows": n, ...}, "observed": true | false,
//    "schema": <the written columns as Spark's schema JSON>,
//    "plan": <node> | null, "planError": "<why the plan could not be read>" | absent}
//
// ("observed": whether the query has DataFrame.observe metrics, read apart only then; "schema":
// the DataFrame's schema, which the writer would otherwise ask for in two more py4j calls)
//
// where <node> is the write's query, each node as
//
//   {"kind": "<class simple name>", "output": [[name, exprId], ...],
//    "expressions": [{"named": exprId | null, "how": "IDENTITY" | "TRANSFORMATION" | "AGGREGATION",
//                     "references": [exprId, ...]}, ...],
//    "children": [<node>, ...]}
//
// and a LogicalRelation leaf as {"kind": "LogicalRelation", "output": [[name, exprId, type], ...]},
// with "format" and "paths" if it reads files (a HadoopFsRelation). lotline.spark.plans turns that
// into reads and column lineage; before this class it walked the same plan through py4j, one round
// trip per node, expression and attribute (25 ms per lot).

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.command.DataWritingCommandExec;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.util.AccumulatorV2;

public class LotlineWriteFacts {
    private static final String[] METRICS = {"numOutputRows", "numOutputBytes", "numFiles"};

    public String describe(QueryExecution qe) {
        LogicalPlan analyzed = qe.analyzed();
        if (!(analyzed instanceof InsertIntoHadoopFsRelationCommand)) {
            return null; // reads, schema inference and other internal queries
        }
        InsertIntoHadoopFsRelationCommand command = (InsertIntoHadoopFsRelationCommand) analyzed;
        StringBuilder out = new StringBuilder();
        out.append("{\"path\":");
        quote(out, command.outputPath().toString());
        out.append(",\"metrics\":{");
        scala.collection.Map metrics = writeMetrics(qe.executedPlan());
        boolean first = true;
        for (int i = 0; metrics != null && i < METRICS.length; i++) {
            scala.Option metric = metrics.get(METRICS[i]);
            if (metric.isDefined()) {
                if (!first) out.append(',');
                first = false;
                quote(out, METRICS[i]);
                out.append(':').append(((AccumulatorV2) metric.get()).value()); // a long
            }
        }
        out.append("},\"observed\":").append(!qe.observedMetrics().isEmpty());
        out.append(",\"schema\":").append(command.query().schema().json());
        out.append(",\"plan\":");
        StringBuilder plan = new StringBuilder();
        try {
            node(plan, command.query());
            out.append(plan);
        } catch (RuntimeException error) {
            out.append("null,\"planError\":");
            quote(out, error.toString());
        }
        out.append('}');
        return out.toString();
    }

    /** The metrics of the plan's DataWritingCommandExec: under adaptive execution it sits in the
     * final plan of an AdaptiveSparkPlanExec, inside a query stage. */
    private static scala.collection.Map writeMetrics(SparkPlan plan) {
        if (plan instanceof DataWritingCommandExec) {
            return plan.metrics();
        }
        if (plan instanceof AdaptiveSparkPlanExec) {
            return writeMetrics(((AdaptiveSparkPlanExec) plan).executedPlan());
        }
        if (plan instanceof QueryStageExec) {
            return writeMetrics(((QueryStageExec) plan).plan());
        }
        scala.collection.Seq children = plan.children();
        for (int i = 0; i < children.size(); i++) {
            scala.collection.Map found = writeMetrics((SparkPlan) children.apply(i));
            if (found != null) {
                return found;
            }
        }
        return null;
    }

    private static void node(StringBuilder out, LogicalPlan plan) {
        out.append("{\"kind\":");
        quote(out, plan.getClass().getSimpleName());
        if (plan instanceof LogicalRelation) {
            Object relation = ((LogicalRelation) plan).relation();
            if (relation instanceof HadoopFsRelation) {
                HadoopFsRelation files = (HadoopFsRelation) relation;
                out.append(",\"format\":");
                quote(out, files.fileFormat().toString());
                out.append(",\"paths\":[");
                scala.collection.Seq paths = files.location().rootPaths();
                for (int i = 0; i < paths.size(); i++) {
                    if (i > 0) out.append(',');
                    quote(out, paths.apply(i).toString());
                }
                out.append(']');
            }
            out.append(",\"output\":");
            attributes(out, plan.output(), true);
            out.append('}');
            return;
        }
        out.append(",\"output\":");
        attributes(out, plan.output(), false);
        out.append(",\"expressions\":[");
        scala.collection.Seq expressions = plan.expressions();
        for (int i = 0; i < expressions.size(); i++) {
            if (i > 0) out.append(',');
            expression(out, (Expression) expressions.apply(i));
        }
        out.append("],\"children\":[");
        scala.collection.Seq children = plan.children();
        for (int i = 0; i < children.size(); i++) {
            if (i > 0) out.append(',');
            node(out, (LogicalPlan) children.apply(i));
        }
        out.append("]}");
    }

    /** A column passed on (maybe renamed) is IDENTITY, one computed with an aggregate AGGREGATION. */
    private static void expression(StringBuilder out, Expression expression) {
        out.append("{\"named\":");
        if (expression instanceof Alias) {
            out.append(((Alias) expression).exprId().id());
        } else if (isAttribute(expression)) {
            out.append(((Attribute) expression).exprId().id());
        } else {
            out.append("null");
        }
        Expression inner = expression instanceof Alias ? ((Alias) expression).child() : expression;
        String how = isAttribute(inner) ? "IDENTITY" : aggregates(inner) ? "AGGREGATION" : "TRANSFORMATION";
        out.append(",\"how\":\"").append(how).append("\",\"references\":[");
        scala.collection.Iterator references = expression.references().iterator();
        boolean first = true;
        while (references.hasNext()) {
            if (!first) out.append(',');
            first = false;
            out.append(((Attribute) references.next()).exprId().id());
        }
        out.append("]}");
    }

    private static boolean isAttribute(Expression expression) {
        return expression.getClass().getSimpleName().equals("AttributeReference");
    }

    private static boolean aggregates(Expression expression) {
        if (expression.getClass().getSimpleName().equals("AggregateExpression")) {
            return true;
        }
        scala.collection.Seq children = expression.children();
        for (int i = 0; i < children.size(); i++) {
            if (aggregates((Expression) children.apply(i))) {
                return true;
            }
        }
        return false;
    }

    private static void attributes(StringBuilder out, scala.collection.Seq attributes, boolean typed) {
        out.append('[');
        for (int i = 0; i < attributes.size(); i++) {
            Attribute attribute = (Attribute) attributes.apply(i);
            if (i > 0) out.append(',');
            out.append('[');
            quote(out, attribute.name());
            out.append(',').append(attribute.exprId().id());
            if (typed) {
                out.append(',');
                quote(out, attribute.dataType().simpleString());
            }
            out.append(']');
        }
        out.append(']');
    }

    private static void quote(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                String hex = Integer.toHexString(c);
                out.append("\\u00").append(hex.length() == 1 ? "0" + hex : hex);
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }
}
