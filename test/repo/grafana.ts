// What chart/dashboards/labeller.json must be, in Grafana's own types: @grafana/schema ships the
// dashboard model and each core panel's options as TypeScript generated from Grafana's CUE
// schema (no JSON Schema). test/repo/dashboard.test.ts checks the JSON, written out as an
// object literal, with `satisfies GrafanaDashboard`, so TypeScript applies these types as
// Grafana's own code does: required fields, enum values, no unknown field.
import type { Dashboard, DataQuery, FieldConfigSource, Panel, RowPanel } from '@grafana/schema';
import type { Options as StatOptions } from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type {
  FieldConfig as TimeSeriesFieldConfig,
  Options as TimeSeriesOptions,
} from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';

/**
 * A type as JSON spells its values: a string enum (ThresholdsMode, FieldColorModeId…) as the
 * strings it stands for, which is what Grafana reads from a dashboard file. Numeric enums stay:
 * a number literal is checked against their members as it is.
 */
export type AsJson<T> = T extends string ? `${T}`
  : T extends readonly (infer Item)[] ? AsJson<Item>[]
  : T extends object ? { [K in keyof T]: AsJson<T[K]> }
  : T;

/**
 * A Prometheus query as Grafana's Prometheus data source saves it. Its type lives in that data
 * source's own package, not in @grafana/schema; these are the fields its query editor writes.
 */
export interface PrometheusQuery extends DataQuery {
  readonly expr: string;
  readonly legendFormat?: string;
  readonly editorMode?: 'code' | 'builder';
  readonly range?: boolean;
  readonly instant?: boolean;
}

/** A panel of one plugin: its type, that plugin's options and custom field config, Prometheus targets. */
type PanelOf<Type extends string, Options, Custom> =
  & Omit<Panel, 'type' | 'options' | 'fieldConfig' | 'targets'>
  & {
    type: Type;
    options: Options;
    fieldConfig: FieldConfigSource<Custom>;
    targets: PrometheusQuery[];
  };

export type StatPanel = PanelOf<'stat', StatOptions, Record<string, never>>;
export type TimeSeriesPanel = PanelOf<'timeseries', TimeSeriesOptions, TimeSeriesFieldConfig>;

/** The dashboard model, with the panels the dashboard uses: rows, stats and time series. */
export type GrafanaDashboard = AsJson<
  Omit<Dashboard, 'panels'> & { panels: (StatPanel | TimeSeriesPanel | RowPanel)[] }
>;
