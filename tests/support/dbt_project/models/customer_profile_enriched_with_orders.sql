select c.customer_id, c.first_name, c.last_name, c.email,
       count(o.id) as order_count, coalesce(sum(o.amount), 0) as lifetime_value,
       c.first_name || ' ' || c.last_name as display_name
from {{ ref('stg_customers') }} c left join {{ ref('raw_orders') }} o on o.customer_id = c.customer_id
group by 1, 2, 3, 4
